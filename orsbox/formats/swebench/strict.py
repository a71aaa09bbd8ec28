"""The strict verdict, beside the official one: the agent's patch without its changes to
protected files (`protected.py`: tests, `conftest.py`, test configuration, start-up
hooks, the test patch's files), applied to a fresh container, run through the same eval
script and judged by the same rule (`grading.grade_patch`).

The official verdict is the harness's, and it rewards a `conftest.py` that turns
failures into passes, because the harness resets only the test patch's files. The strict
one cannot be earned that way: what decides how the tests run is the instance's, not the
agent's. When the patch changes no protected file, the two patches are the same, so the
strict verdict is the official one and no second eval runs (`strict_eval: "skipped"`).

Where strict can differ from official on an honest patch: a fix that needs a test
helper, a `conftest.py` fixture or a test-configuration change the tests rely on (the
tests then see the base commit's version and may fail); a new dependency declared only in
`[tool.pytest]`/tox sections; a `pytest11` plugin the package itself ships.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Literal

from orsbox.formats.swebench import protected
from orsbox.formats.swebench.families import Instance
from orsbox.formats.swebench.grading import GIT, Verdict
from orsbox.sandbox.base import Sandbox

GradingMode = Literal["official", "strict"]
FILE_HEADER = re.compile(r"^diff --git ", re.MULTILINE)
QUOTED = re.compile(r'"((?:[^"\\]|\\.)*)"')
CONFIG_MAX_BYTES = 4 * 1024 * 1024


@dataclass(frozen=True)
class FileDiff:
    """One file's part of a git patch, its header included."""

    path: str
    text: str


def split_patch(patch: str) -> list[FileDiff]:
    """A git patch (`diff --git` sections, as `grading.agent_patch` makes them, renames
    off) cut into one part per file, in order; text before the first header is dropped."""
    starts = [m.start() for m in FILE_HEADER.finditer(patch)]
    parts = [patch[a:b] for a, b in zip(starts, [*starts[1:], len(patch)], strict=True)]
    return [FileDiff(header_path(part.split("\n", 1)[0]), part) for part in parts]


def header_path(header: str) -> str:
    """The path of `diff --git a/P b/P` (renames are off, so both sides name P); git
    quotes a path with unusual bytes in C style, octal escapes included."""
    rest = header.removeprefix("diff --git ")
    quoted = QUOTED.findall(rest)
    if quoted:
        return _unquote(quoted[-1]).removeprefix("b/")
    half = (len(rest) - 1) // 2  # "a/P b/P": both halves are len(P) + 2
    return rest[half + 1 :].removeprefix("b/")


ESCAPES = {"a": 7, "b": 8, "t": 9, "n": 10, "v": 11, "f": 12, "r": 13}


def _unquote(text: str) -> str:
    """Undo git's C-style quoting (`\\n`, `\\"`, octal bytes `\\303\\251`)."""
    out, i = bytearray(), 0
    while i < len(text):
        if text[i] != "\\" or i + 1 == len(text):
            out += text[i].encode("utf-8", errors="surrogateescape")
            i += 1
        elif text[i + 1] in "01234567":
            out.append(int(text[i + 1 : i + 4], 8) & 0xFF)
            i += 4
        else:
            out.append(ESCAPES.get(text[i + 1], ord(text[i + 1]) & 0xFF))
            i += 2
    return out.decode("utf-8", errors="surrogateescape")


# -- which files are protected -------------------------------------------------------
Versions = Callable[[str], Awaitable[tuple[str, str]]]


async def protected_files(
    files: list[FileDiff], instance: Instance, versions: Versions
) -> list[str]:
    """The paths in `files` that are protected; `versions(path)` gives a mixed config
    file's text before and after (read only for those files)."""
    found = []
    for diff in files:
        path = diff.path
        if protected.always_protected(path, instance.test_patch_files):
            found.append(path)
        elif protected.needs_content(path):
            old, new = await versions(path)
            if protected.config_change_is_protected(path, old, new):
                found.append(path)
    return found


def sandbox_versions(sandbox: Sandbox, workdir: str, base: str) -> Versions:
    """`versions` reading the agent's sandbox: the file in the tree the episode started
    with, and in its working tree now ("" where it does not exist). Its processes are
    already killed, so what is read is what the patch was taken from."""

    async def versions(path: str) -> tuple[str, str]:
        quoted = shlex.quote(f"{base}:{path}")
        old = await sandbox.exec(
            ["bash", "-c", f"{GIT} --no-replace-objects cat-file -p {quoted} 2>/dev/null"],
            cwd=workdir,
            output_cap_bytes=CONFIG_MAX_BYTES,
        )
        new = await sandbox.exec(
            ["bash", "-c", f"cat -- {shlex.quote(path)} 2>/dev/null"],
            cwd=workdir,
            output_cap_bytes=CONFIG_MAX_BYTES,
        )
        return old.output if old.exit_code == 0 else "", new.output if new.exit_code == 0 else ""

    return versions


# -- the two verdicts ------------------------------------------------------------------
@dataclass
class Verdicts:
    """The official and the strict verdict of one submission, and which is the reward."""

    official: Verdict
    strict: Verdict
    protected_changed: list[str]
    strict_eval: Literal["ran", "skipped", "nothing left"]
    mode: GradingMode = "official"

    @property
    def chosen(self) -> Verdict:
        return self.strict if self.mode == "strict" else self.official

    @property
    def reward(self) -> float:
        return self.chosen.reward

    def metadata(self) -> dict[str, Any]:
        """The chosen verdict's fields at the top (as before), both verdicts in full."""
        return {
            **self.chosen.metadata(),
            "grading": self.mode,
            "verdicts": {"official": self.official.metadata(), "strict": self.strict.metadata()},
            "strict_eval": self.strict_eval,
            "protected_files_changed": self.protected_changed,
        }

    def text(self) -> str:
        other = "strict" if self.mode == "official" else "official"
        shown = self.strict if other == "strict" else self.official
        summary = "resolved" if shown.resolved else "not resolved"
        return f"{self.chosen.text()}\n({other} verdict: {summary})"


async def grade_both(
    patch: str,
    instance: Instance,
    versions: Versions,
    grade: Callable[[str], Awaitable[Verdict]],
    mode: GradingMode,
) -> Verdicts:
    """Grade `patch` officially, and again without its protected files when it has any
    (`grade(patch)` runs one eval in a fresh container)."""
    files = split_patch(patch)
    changed = await protected_files(files, instance, versions)
    official = await grade(patch)
    if not changed:
        return Verdicts(official, official, [], "skipped", mode)
    kept = "".join(f.text for f in files if f.path not in set(changed))
    if not kept.strip():
        reason = "the patch changes only protected files (" + ", ".join(changed[:20]) + ")"
        return Verdicts(official, Verdict.not_run(instance, reason), changed, "nothing left", mode)
    return Verdicts(official, await grade(kept), changed, "ran", mode)


def not_graded(verdict: Verdict, mode: GradingMode) -> Verdicts:
    """Both verdicts for a submission no eval ran for (an empty patch, no diff)."""
    return Verdicts(verdict, verdict, [], "skipped", mode)
