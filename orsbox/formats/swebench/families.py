"""Which family a row belongs to, and what that family says about its instance: the
image, the working directory, the eval script, the log parser and the verdict rule.

    v5           SWE-bench 5 self-contained rows: `eval_script`, `log_parser`, `image`
    swe-rebench  SWE-rebench V2: `install_config` with `test_cmd` and `log_parser`;
                 the repository is at the image's working directory
    r2e-gym      R2E-Gym: `docker_image`, `expected_output_json`; hidden tests in the
                 image, run by its `run_tests.sh`; resolved when the results equal it
    swe-smith    SWE-smith: `patch` introduces the bug (on a branch named by the
                 instance when the image has one); no `test_patch`
    v4           SWE-bench 4 rows (and SWE-Gym's, same columns; told apart by the
                 repository: one SWE-bench does not know takes SWE-Gym's image names)

Every family but R2E-Gym ends as a v5-shaped instance (eval script, parser, eval type)
that the swebench package grades; rows that carry no test command (v4, SWE-Gym,
SWE-smith) take it from swebench 4's spec tables when installed, else from the row's
`test_cmd` or `--test-cmd`.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field
from typing import Any, Literal

from orsbox.formats.swebench import SWEBenchOptions, harness
from orsbox.formats.swebench.images import instance_image
from orsbox.formats.swebench.rows import Row, json_field, test_ids, text_field

Family = Literal["v5", "swe-rebench", "r2e-gym", "swe-smith", "v4", "swe-gym"]

TESTBED = "/testbed"
CONDA = ["source /opt/miniconda3/bin/activate", "conda activate testbed"]
HEREDOC = "EOF_114329324912"  # the delimiter SWE-bench's eval scripts use
DEFAULT_PARSER = "parse_log_pytest"
NON_TEST_SUFFIXES = (
    ".json",
    ".png",
    "csv",
    ".txt",
    ".md",
    ".jpg",
    ".jpeg",
    ".pkl",
    ".yml",
    ".yaml",
    ".toml",
)
R2E_HIDDEN = ("/r2e_tests", "/root/r2e_tests")


@dataclass(frozen=True)
class Instance:
    """One task, everything the environment and the grader need, checked at load."""

    instance_id: str
    family: Family
    repo: str
    image: str
    workdir: str | None  # None: the image's working directory
    problem_statement: str
    hints: str
    fail_to_pass: list[str]
    pass_to_pass: list[str]
    eval_script: str
    log_parser: str = DEFAULT_PARSER
    eval_type: str = "pass_and_fail"
    setup_script: str = ""  # run before the agent starts and before grading
    hide_script: str = ""  # run in the agent's sandbox only (hidden tests out of reach)
    expected: dict[str, str] = field(default_factory=dict)  # R2E-Gym's expected results
    version: str = ""
    test_patch_files: tuple[str, ...] = ()  # what the eval resets or rewrites (strict.py)

    def harness_instance(self) -> dict[str, Any]:
        """The v5-shaped dict swebench's `make_test_spec` takes."""
        return {
            "instance_id": self.instance_id,
            "image": self.image,
            "repo": self.repo,
            "version": self.version,
            "FAIL_TO_PASS": self.fail_to_pass,
            "PASS_TO_PASS": self.pass_to_pass,
            "log_parser": self.log_parser,
            "eval_type": self.eval_type,
            "eval_script": self.eval_script,
        }


def family_of(row: Row) -> Family:
    data = row.data
    if data.get("eval_script"):
        return "v5"
    if data.get("install_config"):
        return "swe-rebench"
    if "expected_output_json" in data:
        return "r2e-gym"
    if not data.get("test_patch") and data.get("patch"):
        return "swe-smith"
    repo = text_field(row, "repo")
    return "v4" if repo in harness.repo_parsers() else "swe-gym"


def read_instance(row: Row, options: SWEBenchOptions) -> Instance:
    """The instance a row describes; a `ManifestError` naming the row and field if not."""
    family = family_of(row)
    build = {"v5": _v5, "swe-rebench": _rebench, "r2e-gym": _r2e, "swe-smith": _smith}
    return build.get(family, _v4)(row, options, family)


def _common(row: Row, options: SWEBenchOptions, family: Family, **fields: Any) -> Instance:
    instance_id = fields.pop("instance_id", None) or text_field(row, "instance_id")
    values: dict[str, Any] = {
        "instance_id": instance_id,
        "family": family,
        "repo": text_field(row, "repo", required=False),
        "image": instance_image(row, instance_id, family, options),
        "workdir": TESTBED,
        "problem_statement": text_field(row, "problem_statement"),
        "hints": text_field(row, "hints_text", required=False),
        "version": str(row.data.get("version") or ""),
        "test_patch_files": tuple(patched_files(str(row.data.get("test_patch") or ""))),
    }
    values.update(fields)
    if "fail_to_pass" not in values:
        values["fail_to_pass"] = test_ids(row, "FAIL_TO_PASS")
        values["pass_to_pass"] = test_ids(row, "PASS_TO_PASS")
    return Instance(**values)


def _parser(row: Row, name: str) -> str:
    """A parser name the swebench package knows; `pytest` is read as `parse_log_pytest`."""
    registry = harness.parser_registry()
    for candidate in (name, f"parse_log_{name}"):
        if candidate in registry:
            return candidate
    raise row.error(f"unknown log parser {name!r} (swebench knows: {', '.join(sorted(registry))})")


def _eval_type(row: Row, repo: str) -> str:
    value = row.data.get("eval_type")
    if value:
        if value not in ("pass_and_fail", "fail_only"):
            raise row.error(f"eval_type {value!r} is neither pass_and_fail nor fail_only")
        return str(value)
    return "fail_only" if repo in harness.fail_only_repos() else "pass_and_fail"


# -- the families --------------------------------------------------------------------------
def _v5(row: Row, options: SWEBenchOptions, family: Family) -> Instance:
    repo = text_field(row, "repo")
    return _common(
        row,
        options,
        family,
        eval_script=text_field(row, "eval_script"),
        log_parser=_parser(row, text_field(row, "log_parser")),
        eval_type=_eval_type(row, repo),
    )


def _v4(row: Row, options: SWEBenchOptions, family: Family) -> Instance:
    repo = text_field(row, "repo")
    base = text_field(row, "base_commit")
    version = str(row.data.get("version") or "")
    spec = harness.v4_specs(repo, version) or {}
    test_cmd = _test_cmd(row, options, spec.get("test_cmd"))
    named = row.data.get("log_parser")
    parser = _parser(row, named) if named else harness.repo_parsers().get(repo, DEFAULT_PARSER)
    test_patch = text_field(row, "test_patch")
    script = eval_script(
        base,
        test_patch,
        test_cmd,
        directives(repo, test_patch),
        TESTBED,
        conda=True,
        before=[*spec.get("eval_commands", []), *([spec["install"]] if "install" in spec else [])],
    )
    return _common(
        row, options, family, eval_script=script, log_parser=parser, eval_type=_eval_type(row, repo)
    )


def _smith(row: Row, options: SWEBenchOptions, family: Family) -> Instance:
    """The image holds the repository before the bug; the bug is the instance's branch
    when the image has it, else `patch` applied and committed at setup."""
    instance = _common(row, options, family, eval_script="")
    bug = text_field(row, "patch")
    branch = shlex.quote(instance.instance_id)
    setup = (
        f"cd {TESTBED} && if git rev-parse -q --verify refs/heads/{branch} >/dev/null; "
        f"then git checkout -q {branch}; else git apply - <<'{HEREDOC}'\n{bug}\n{HEREDOC}\n"
        "git -c user.name=orsbox -c user.email=orsbox@localhost commit -qam 'SWE-smith instance'"
        "; fi"
    )
    test_files = sorted(
        {t.split("::")[0] for t in instance.fail_to_pass + instance.pass_to_pass if ".py::" in t}
    )
    parser = row.data.get("log_parser")
    script = eval_script(
        "HEAD", "", _test_cmd(row, options, None), [], TESTBED, conda=True, reset=test_files
    )
    return _replace(
        instance,
        test_patch_files=tuple(test_files),
        setup_script=setup,
        eval_script=script,
        log_parser=_parser(row, parser) if parser else DEFAULT_PARSER,
    )


def _rebench(row: Row, options: SWEBenchOptions, family: Family) -> Instance:
    config = json_field(row, "install_config")
    if not isinstance(config, dict):
        raise row.error("field 'install_config' must be an object")
    test_cmd = config.get("test_cmd")
    if isinstance(test_cmd, list):
        test_cmd = " && ".join(test_cmd)
    if not isinstance(test_cmd, str) or not test_cmd:
        raise row.error("install_config has no test_cmd")
    parser = config.get("log_parser") or row.data.get("log_parser") or DEFAULT_PARSER
    base = text_field(row, "base_commit")
    test_patch = text_field(row, "test_patch")
    script = eval_script(base, test_patch, test_cmd, [], None, conda=False)
    repo = text_field(row, "repo")
    return _common(
        row,
        options,
        family,
        workdir=row.data.get("workdir") or None,
        eval_script=script,
        log_parser=_parser(row, str(parser)),
        eval_type=_eval_type(row, repo),
    )


def _r2e(row: Row, options: SWEBenchOptions, family: Family) -> Instance:
    expected = json_field(row, "expected_output_json")
    if not isinstance(expected, dict):
        raise row.error("field 'expected_output_json' must be an object of test -> status")
    instance_id = row.data.get("instance_id") or text_field(row, "docker_image")
    hidden = " ".join(R2E_HIDDEN)
    find_tests = " ".join(f"[ -d {d} ] && ln -sfn {d} {TESTBED}/r2e_tests;" for d in R2E_HIDDEN)
    script = f"cd {TESTBED}\n{find_tests}\n: '{START}'\nbash run_tests.sh\n: '{END}'\n"
    return _common(
        row,
        options,
        family,
        instance_id=instance_id,
        repo=str(row.data.get("repo") or row.data.get("repo_name") or ""),
        fail_to_pass=sorted(expected),
        pass_to_pass=[],
        eval_script=script,
        hide_script=f"rm -rf {hidden} {TESTBED}/r2e_tests",
        expected={str(k): str(v) for k, v in expected.items()},
    )


START = ">>>>> Start Test Output"
END = ">>>>> End Test Output"


def _test_cmd(row: Row, options: SWEBenchOptions, from_specs: str | None) -> str:
    command = row.data.get("test_cmd") or from_specs or options.test_cmd
    if not command:
        repo, version = row.data.get("repo"), row.data.get("version")
        raise row.error(
            f"no test command for this row: SWE-bench 4's spec tables have none for "
            f"{repo} version {version}; give one with --test-cmd (or a test_cmd column)"
        )
    return str(command)


def _replace(instance: Instance, **changes: Any) -> Instance:
    from dataclasses import replace

    return replace(instance, **changes)


# -- eval scripts ------------------------------------------------------------------------
def test_files(test_patch: str) -> list[str]:
    """Files a test patch modifies (what the harness resets to the base commit)."""
    return re.findall(r"^--- a/(.*)$", test_patch, re.MULTILINE)


def patched_files(patch: str) -> list[str]:
    """Every file a patch touches, created ones included."""
    return re.findall(r"^diff --git a/.* b/(.*)$", patch, re.MULTILINE)


def directives(repo: str, test_patch: str) -> list[str]:
    """The test files a v4 eval script names after the test command (django's as modules)."""
    files = patched_files(test_patch)
    files = [f for f in files if not f.endswith(NON_TEST_SUFFIXES)]
    if repo == "django/django":
        files = [f.removesuffix(".py").removeprefix("tests/").replace("/", ".") for f in files]
    return files


def eval_script(
    base: str,
    test_patch: str,
    test_cmd: str,
    names: list[str],
    workdir: str | None,
    *,
    conda: bool,
    before: list[str] | None = None,
    reset: list[str] | None = None,
) -> str:
    """An eval script in SWE-bench's shape: reset the test files to `base`, apply the
    test patch, run the tests between the markers, reset again."""
    files = reset if reset is not None else test_files(test_patch)
    reset_cmd = f"git checkout {base} {' '.join(map(shlex.quote, files))}" if files else ""
    lines = [*(CONDA if conda else []), *([f"cd {workdir}"] if workdir else []), *(before or [])]
    lines.append(reset_cmd)
    if test_patch:
        lines.append(f"git apply -v - <<'{HEREDOC}'\n{test_patch}\n{HEREDOC}")
    lines += [f": '{START}'", " ".join([test_cmd, *names]), f": '{END}'", reset_cmd]
    return "\n".join(["#!/bin/bash", "set -uxo pipefail", *filter(None, lines)]) + "\n"
