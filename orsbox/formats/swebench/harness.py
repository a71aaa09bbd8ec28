"""The parts of the official `swebench` package orsbox uses, imported only when a
SWE-style dataset is loaded: its log parsers, its test-spec builder (which makes an eval
script record the test command's exit status) and its resolution rule.

Importing `swebench.harness` takes 2-10 s (it pulls in `datasets`), so it happens once,
at load, never while an episode is graded. swebench 5 dropped the per-repo, per-version
spec tables that SWE-bench 4 rows are graded with; orsbox ships those of swebench 4.1.0
(`specs_v4.json`) and `v4_specs` reads them.
"""

from __future__ import annotations

import functools
import json
import tempfile
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from orsbox.errors import ManifestError

INSTALL_HINT = "the SWE-bench format needs the swebench package: pip install 'orsbox[swebench]'"
FAIL_TO_PASS = "FAIL_TO_PASS"
PASS_TO_PASS = "PASS_TO_PASS"


@functools.cache
def _module(name: str) -> ModuleType:
    import importlib

    try:
        return importlib.import_module(name)
    except ImportError as e:
        raise ManifestError(f"{INSTALL_HINT} ({e})") from None


def require() -> None:
    """Import what grading uses now (load time), so no episode pays for it."""
    _module("swebench.harness.grading")
    _module("swebench.harness.utils")


def parser_registry() -> dict[str, Any]:
    return _module("swebench.harness.log_parsers").PARSER_REGISTRY


def parser_name(function: Any) -> str | None:
    """The registry's name for a parser function: its own name when registered under it
    (the registry also files one function under other repositories' names, e.g.
    `parse_log_pytest` as `parse_log_xarray`), else the first name it has there."""
    registry = parser_registry()
    own = getattr(function, "__name__", "")
    if registry.get(own) is function:
        return own
    return next((name for name, f in registry.items() if f is function), None)


@functools.cache
def repo_parsers() -> dict[str, str]:
    """SWE-bench's repository -> log parser name (v4's MAP_REPO_TO_PARSER, which v5
    keeps per language as MAP_REPO_TO_PARSER_PY, _JS, ...)."""
    table = dict(getattr(_module("swebench.harness.log_parsers"), "MAP_REPO_TO_PARSER", {}))
    for language in ("python", "javascript", "c", "go", "java", "php", "ruby", "rust"):
        module = _optional(f"swebench.harness.log_parsers.{language}")
        for name in dir(module) if module else ():
            if name.startswith("MAP_REPO_TO_PARSER_"):
                table.update(getattr(module, name))
    names = {repo: parser_name(f) for repo, f in table.items()}
    return {repo: name for repo, name in names.items() if name}


def _optional(name: str) -> ModuleType | None:
    try:
        return _module(name)
    except ManifestError:
        return None


def fail_only_repos() -> set[str]:
    return set(getattr(_module("swebench.harness.constants"), "FAIL_ONLY_REPOS", set()))


SPECS_V4 = Path(__file__).with_name("specs_v4.json")


@functools.cache
def shipped_v4_specs() -> dict[str, dict[str, dict[str, Any]]]:
    """swebench 4.1.0's spec tables as orsbox ships them (`specs_v4.json`, made by
    scripts/extract-swebench4-specs.py; its `origin` says where from): swebench 5 no
    longer has them, and the two cannot be installed together."""
    return json.loads(SPECS_V4.read_text())["specs"]


def v4_specs(repo: str, version: str) -> dict[str, Any] | None:
    """SWE-bench 4's spec (test_cmd, eval_commands, install) for `repo` at `version`:
    the installed swebench's table when it has one, else the shipped copy of 4.1.0's;
    None for a repository or version neither knows."""
    constants = _module("swebench.harness.constants")
    table = getattr(constants, "MAP_REPO_VERSION_TO_SPECS", None) or shipped_v4_specs()
    spec = table.get(repo, {}).get(version)
    return dict(spec) if spec else None


# -- grading -----------------------------------------------------------------------------
@dataclass(frozen=True)
class Report:
    """What the official rule made of one test log."""

    resolved: bool
    parsed: bool  # the log had test results (and passed the exit-code check)
    fail_to_pass: dict[str, list[str]]  # {"success": [...], "failure": [...]}
    pass_to_pass: dict[str, list[str]]


def test_spec(instance: dict[str, Any]) -> Any:
    """swebench's `TestSpec` for a self-contained (v5-shaped) instance dict."""
    return _module("swebench.harness.utils").make_test_spec(instance)


def grade_log(spec: Any, log: str) -> Report:
    """Parse `log` with the instance's parser and apply the resolution rule, exactly as
    `swebench.harness.grading.get_eval_report` does (it reads the log from a file)."""
    grading = _module("swebench.harness.grading")
    constants = _module("swebench.harness.constants")
    with tempfile.TemporaryDirectory(prefix="orsbox-swe-") as folder:
        path = Path(folder) / "test_output.txt"
        path.write_text(log, encoding="utf-8", errors="replace")
        status_map, parsed = grading.get_logs_eval(spec, str(path))
    empty: dict[str, list[str]] = {"success": [], "failure": []}
    if not parsed:
        return Report(False, False, empty, empty)
    gold = {FAIL_TO_PASS: spec.FAIL_TO_PASS, PASS_TO_PASS: spec.PASS_TO_PASS}
    eval_type = constants.EvalType(spec.eval_type or "pass_and_fail")
    report = grading.get_eval_tests_report(status_map, gold, eval_type=eval_type)
    resolved = grading.get_resolution_status(report) == constants.ResolvedStatus.FULL.value
    return Report(resolved, True, report[FAIL_TO_PASS], report[PASS_TO_PASS])
