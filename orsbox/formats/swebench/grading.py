"""Grading a submission the way the official harness does, which also makes it
unforgeable.

1. Every process the agent started is killed (`Sandbox.kill_processes`).
2. The agent's patch is the working tree's diff against the base commit, taken in the
   agent's sandbox with a throw-away index (the agent's index stays as it was) and with
   hooks, external diff drivers and textconv disabled, so its git config cannot bend it.
3. A fresh container starts from the same image (no network, same limits): nothing the
   agent did to the filesystem, the test files or git reaches it but the patch.
4. The patch is applied as the row's harness version applies it (`patching.py`: v5 rows
   as swebench 5.0.2, the others as 4.1.0); the metadata names the strategy and attempt.
5. The eval script runs (it resets the files the test patch touches, applies the test
   patch, runs the tests between markers); its log is parsed by the instance's parser and
   judged by the swebench package's resolution rule (`harness.grade_log`), or, for
   R2E-Gym, compared with the expected results (`r2e.py`).
The grading container is removed whatever happens. Where grading could not run (the
container did not start, the eval script timed out, was killed or left no complete
test output), `GradingError` is raised instead of a verdict (`could_not_run`).
"""

from __future__ import annotations

import shlex
import time
from dataclasses import dataclass, field
from typing import Any

from orsbox.errors import SandboxError
from orsbox.formats.swebench import could_not_run, harness, patching, r2e
from orsbox.formats.swebench.families import Instance
from orsbox.sandbox.base import Sandbox, SandboxBackend, SandboxSpec

EVAL_FILE = "/tmp/orsbox-eval.sh"
LOG_FILE = "/tmp/orsbox-eval.log"
AGENT_PATCH_FILE = "/tmp/.orsbox-agent.patch"
PATCH_MAX_BYTES = 64 * 1024 * 1024
LOG_MAX_BYTES = 256 * 1024 * 1024
LOG_TAIL_CHARS = 4000
GIT = (
    "git -c safe.directory='*' -c core.hooksPath=/dev/null -c core.fsmonitor=false "
    "-c core.attributesFile=/dev/null -c diff.noprefix=false"
)
# The grading container has no network. An eval script's `pip install -e .` (the install
# step of SWE-bench 4's specs) would try to fetch its build backend for an isolated build,
# fail (`Installing build dependencies ... error`, ~5 s of name-resolution retries) and
# leave the image's old install to be tested: a patch adding an entry point or changing
# setup.py would be graded without it. So pip builds with what the image has (the
# environment's setuptools) and looks at no index. pip reads PIP_NO_BUILD_ISOLATION
# inverted: "0" turns build isolation off (pip's documented quirk).
OFFLINE_PIP_ENV = {
    "PIP_NO_BUILD_ISOLATION": "0",
    "PIP_NO_INDEX": "1",
    "PIP_DISABLE_PIP_VERSION_CHECK": "1",
}


@dataclass
class Verdict:
    """What `submit` answers: the reward and why."""

    resolved: bool
    reason: str
    fail_to_pass: dict[str, list[str]] = field(default_factory=dict)
    pass_to_pass: dict[str, list[str]] = field(default_factory=dict)
    log_tail: str = ""
    timings: dict[str, float] = field(default_factory=dict)
    patch_application: dict[str, Any] = field(default_factory=dict)  # `Applied.metadata()`
    log_parser: str = ""
    expected: tuple[int, int] = (0, 0)  # how many FAIL_TO_PASS and PASS_TO_PASS tests

    @classmethod
    def not_run(cls, instance: Instance, reason: str, **fields: Any) -> Verdict:
        """Not resolved, without a test log (nothing to apply, a patch that does not
        apply): the totals are still the instance's."""
        return cls(False, reason, expected=expected_totals(instance), **fields)

    @property
    def reward(self) -> float:
        return 1.0 if self.resolved else 0.0

    def metadata(self) -> dict[str, Any]:
        def counts(report: dict[str, list[str]], expected: int) -> dict[str, int]:
            ok, bad = report.get("success", []), report.get("failure", [])
            return {"passed": len(ok), "total": max(len(ok) + len(bad), expected)}

        failed = [*self.fail_to_pass.get("failure", []), *self.pass_to_pass.get("failure", [])]
        return {
            "resolved": self.resolved,
            "reason": self.reason,
            "FAIL_TO_PASS": counts(self.fail_to_pass, self.expected[0]),
            "PASS_TO_PASS": counts(self.pass_to_pass, self.expected[1]),
            "failed_tests": failed,
            "log_parser": self.log_parser,
            "log_tail": self.log_tail,
            "timings_s": {k: round(v, 3) for k, v in self.timings.items()},
            "patch_application": self.patch_application,
        }

    def text(self) -> str:
        summary = "resolved" if self.resolved else "not resolved"
        meta = self.metadata()
        f2p, p2p = meta["FAIL_TO_PASS"], meta["PASS_TO_PASS"]
        lines = [
            f"{summary}: {self.reason}",
            f"FAIL_TO_PASS {f2p['passed']}/{f2p['total']}, "
            f"PASS_TO_PASS {p2p['passed']}/{p2p['total']}",
        ]
        if meta["failed_tests"]:
            lines.append("failed: " + ", ".join(meta["failed_tests"][:20]))
        return "\n".join(lines)


def expected_totals(instance: Instance) -> tuple[int, int]:
    return len(instance.fail_to_pass), len(instance.pass_to_pass)


# -- the agent's side ------------------------------------------------------------------------
def _with_scratch_index(workdir: str, commands: str) -> str:
    """`commands` run in `workdir` with a throw-away index and no user or system git
    config, so neither the agent's index nor its global settings take part."""
    return (
        f"cd {shlex.quote(workdir)} || exit 90\n"
        "export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1 GIT_INDEX_FILE=$(mktemp -u)\n"
        "trap 'rm -f \"$GIT_INDEX_FILE\"' EXIT\n"
        f"{GIT} read-tree HEAD && {GIT} add -A . && {commands}"
    )


async def snapshot_tree(sandbox: Sandbox, workdir: str) -> str:
    """The git tree of the working tree as the episode starts (what the agent's diff is
    taken against): HEAD's, plus the untracked files the image keeps (an R2E-Gym
    `run_tests.sh`), so only the agent's changes make the patch. Cheap on a large
    repository: untracked files are found by a directory walk, and only they are hashed."""
    untracked = f"{GIT} ls-files -z --others --exclude-standard"
    script = (
        f"cd {shlex.quote(workdir)} || exit 90\n"
        "export GIT_CONFIG_GLOBAL=/dev/null GIT_CONFIG_NOSYSTEM=1\n"
        f"if [ -z \"$({untracked} | head -c1)\" ]; then exec {GIT} rev-parse 'HEAD^{{tree}}'; fi\n"
        f"{untracked} > /tmp/.orsbox-untracked || exit 91\n"
        "export GIT_INDEX_FILE=$(mktemp -u)\n"
        "trap 'rm -f \"$GIT_INDEX_FILE\" /tmp/.orsbox-untracked' EXIT\n"
        f"{GIT} read-tree HEAD && xargs -0 {GIT} add -f -- < /tmp/.orsbox-untracked && "
        f"{GIT} write-tree"
    )
    result = await sandbox.exec(["bash", "-c", script], timeout_s=300)
    if result.exit_code != 0:
        raise PatchError(f"could not read the repository: {result.output.strip()[-1000:]}")
    return result.output.strip().splitlines()[-1]


async def agent_patch(sandbox: Sandbox, workdir: str, base: str) -> str:
    """The working tree's diff against `base` (a tree), new files included, binary
    files as binary patches; the agent's own index is not touched."""
    script = _with_scratch_index(
        workdir,
        f"{GIT} diff --cached --binary --no-ext-diff --no-textconv --no-color "
        f"--no-renames {shlex.quote(base)} > {AGENT_PATCH_FILE}",
    )
    result = await sandbox.exec(["bash", "-c", script], timeout_s=300)
    if result.exit_code != 0:
        raise PatchError(f"could not compute the patch: {result.output.strip()[-1000:]}")
    data = await sandbox.read_file(AGENT_PATCH_FILE, max_bytes=PATCH_MAX_BYTES)
    return data.decode("utf-8", errors="surrogateescape")


class PatchError(Exception):
    """The submission has no usable patch (graded 0.0, not a server fault)."""


# -- the grading container ---------------------------------------------------------------
async def grade_patch(
    backend: SandboxBackend, spec: SandboxSpec, instance: Instance, patch: str, timeout_s: float
) -> Verdict:
    """Apply `patch` in a fresh container from `spec` and judge the tests' log."""
    timings: dict[str, float] = {}
    started = time.monotonic()
    try:
        sandbox = await backend.start(spec)
    except SandboxError as e:
        raise could_not_run.container_failed(e) from e
    timings["start"] = time.monotonic() - started
    try:
        workdir = instance.workdir or (await _pwd(sandbox))
        if instance.setup_script:
            await _checked(sandbox, instance.setup_script, "the instance's setup")
        strategy = patching.strategy_for(instance.family)
        applied = await patching.apply_patch(sandbox, patch, workdir, strategy)
        if not applied.applied:
            reason = f"the patch does not apply: {applied.output[-2000:]}"
            return Verdict.not_run(
                instance, reason, timings=timings, patch_application=applied.metadata()
            )
        log, timings["eval"] = await run_eval(sandbox, instance, timeout_s)
    finally:
        await sandbox.close()
    verdict = judge(instance, log, timings)
    verdict.patch_application = applied.metadata()
    return verdict


async def run_eval(sandbox: Sandbox, instance: Instance, timeout_s: float) -> tuple[str, float]:
    """Run the instance's eval script; its whole log (read from a file, so no output
    cap cuts test lines out of it) and how long the script took."""
    script = instance.eval_script
    if instance.family != "r2e-gym":
        script = harness.test_spec(instance.harness_instance()).eval_script
    await sandbox.write_file(EVAL_FILE, script.encode())
    result = await sandbox.exec(
        ["bash", "-c", f"/bin/bash {EVAL_FILE} > {LOG_FILE} 2>&1"],
        timeout_s=timeout_s,
        env=OFFLINE_PIP_ENV,
    )
    log = (await sandbox.read_file(LOG_FILE, max_bytes=LOG_MAX_BYTES)).decode(errors="replace")
    markers = instance.family != "r2e-gym"
    error = could_not_run.eval_error(result, log, timeout_s, markers=markers)
    if error is not None:
        raise error
    return log, result.duration_s


def judge(instance: Instance, log: str, timings: dict[str, float] | None = None) -> Verdict:
    tail = log[-LOG_TAIL_CHARS:]
    totals = expected_totals(instance)
    if instance.family == "r2e-gym":
        resolved, reason, f2p = r2e.judge(instance.expected, log)
        return Verdict(
            resolved, reason, f2p, {}, tail, timings or {}, log_parser="r2e-gym", expected=totals
        )
    report = harness.grade_log(harness.test_spec(instance.harness_instance()), log)
    if not report.parsed:
        reason = "the log has no test results the official rule accepts (tests did not run, "
        reason += "or exited non-zero while reporting no failure)"
    else:
        reason = "every FAIL_TO_PASS and PASS_TO_PASS test passes"
        if not report.resolved:
            reason = "some FAIL_TO_PASS or PASS_TO_PASS tests do not pass"
    return Verdict(
        report.resolved,
        reason,
        report.fail_to_pass,
        report.pass_to_pass,
        tail,
        timings or {},
        log_parser=instance.log_parser,
        expected=totals,
    )


async def _pwd(sandbox: Sandbox) -> str:
    result = await sandbox.exec(["pwd"])
    return result.output.strip() or "/"


async def _checked(sandbox: Sandbox, script: str, what: str) -> None:
    result = await sandbox.exec(["bash", "-c", script], timeout_s=600)
    if result.exit_code != 0:  # a fresh container the agent never touched
        raise could_not_run.container_failed(
            SandboxError(f"{what} failed: {result.output.strip()[-2000:]}")
        )
