"""The test dataset: one small repository (`image/repo`), its patches made with git from
edits written here, and one row per family in that family's own column layout."""

from __future__ import annotations

import json
import subprocess
from dataclasses import dataclass
from functools import cache
from pathlib import Path

REPO = Path(__file__).parent / "image" / "repo"

FIXED_DIV = """def div(a, b):
    if b == 0:
        raise ValueError("division by zero")
    return a / b
"""
NEW_TEST = """

def test_div_zero():
    import pytest

    with pytest.raises(ValueError):
        div(1, 0)
"""
PROBLEM = "calc.ops.div(1, 0) raises ZeroDivisionError; it should raise ValueError."
F2P = ["tests/test_ops.py::test_div_zero"]
P2P = ["tests/test_ops.py::test_add", "tests/test_ops.py::test_sub", "tests/test_ops.py::test_div"]


def _git(folder: Path, *args: str) -> str:
    done = subprocess.run(["git", "-C", str(folder), *args], capture_output=True, check=True)
    return done.stdout.decode("utf-8", errors="surrogateescape")


def diff_of(edits: dict[str, str | bytes], tmp: Path) -> str:
    """A git patch (binary-safe) that makes `edits` ({path: new content}) to the repo."""
    folder = tmp / "repo"
    subprocess.run(["cp", "-r", str(REPO), str(folder)], check=True)
    _git(folder, "init", "-q")
    _git(folder, "add", "-A")
    _git(folder, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    for path, content in edits.items():
        target = folder / path
        target.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            target.write_bytes(content)
        else:
            target.write_text(content)
    _git(folder, "add", "-A")
    patch = _git(folder, "diff", "--cached", "--binary")
    subprocess.run(["rm", "-rf", str(folder)], check=True)
    return patch


def ops_with(div: str) -> str:
    text = (REPO / "calc" / "ops.py").read_text()
    start = text.index("def div")
    return text[:start] + div


@dataclass(frozen=True)
class Patches:
    gold: str
    test: str
    breaks_p2p: str
    binary_and_gold: str
    bug: str  # SWE-smith: introduces a bug into the base


@cache
def patches() -> Patches:
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        tmp = Path(folder)
        fixed = ops_with(FIXED_DIV)
        tests = (REPO / "tests" / "test_ops.py").read_text() + NEW_TEST
        broken = fixed.replace("return a + b", "return a + b + 1")
        blob = (REPO / "data" / "blob.bin").read_bytes() + b"\x00\xfe\x01"
        bug = (REPO / "calc" / "ops.py").read_text().replace("return a / b", "return a * b")
        return Patches(
            gold=diff_of({"calc/ops.py": fixed}, tmp),
            test=diff_of({"tests/test_ops.py": tests}, tmp),
            breaks_p2p=diff_of({"calc/ops.py": broken}, tmp),
            binary_and_gold=diff_of({"calc/ops.py": fixed, "data/blob.bin": blob}, tmp),
            bug=diff_of({"calc/ops.py": bug}, tmp),
        )


def base_commit() -> str:
    from tests.formats.swebench.images import image_head

    return image_head()


# -- one row per family, each in its dataset's own column layout --------------------------
def v4_row() -> dict[str, object]:
    """SWE-bench (v4 on the hubs): lists as JSON strings, no image column. (A repository
    SWE-bench knows, so the official image name and its log parser apply.)"""
    p = patches()
    return {
        "repo": "pytest-dev/pytest",
        "instance_id": "pytest-dev__pytest-1",
        "base_commit": base_commit(),
        "patch": p.gold,
        "test_patch": p.test,
        "problem_statement": PROBLEM,
        "hints_text": "Look at div.",
        "created_at": "2026-01-01T00:00:00Z",
        "version": "5.4",  # a version SWE-bench 4's spec tables have for pytest
        "FAIL_TO_PASS": json.dumps(F2P),
        "PASS_TO_PASS": json.dumps(P2P),
        "environment_setup_commit": base_commit(),
    }


def v5_row(image: str) -> dict[str, object]:
    """SWE-bench 5: self-contained, with image, log_parser, eval_type and eval_script."""
    from orsbox.formats.swebench.families import eval_script

    p = patches()
    script = eval_script(
        base_commit(), p.test, "pytest -rA", ["tests/test_ops.py"], "/testbed", conda=True
    )
    return {
        "repo": "calc/calc",
        "instance_id": "calc__calc-5",
        "base_commit": base_commit(),
        "patch": p.gold,
        "test_patch": p.test,
        "problem_statement": PROBLEM,
        "hints_text": "",
        "version": "1.0",
        "FAIL_TO_PASS": F2P,
        "PASS_TO_PASS": P2P,
        "image": image,
        "log_parser": "parse_log_pytest",
        "eval_type": "pass_and_fail",
        "eval_script": script,
    }


def gym_row() -> dict[str, object]:
    """SWE-Gym: v4's columns, a repository SWE-bench does not have."""
    row = v4_row()
    row.update(repo="calc-org/calc", instance_id="calc-org__calc-7")
    return row


def smith_row(image: str, instance_id: str) -> dict[str, object]:
    """SWE-smith: `patch` introduces the bug; lists as lists; image_name; no test_patch."""
    return {
        "instance_id": instance_id,
        "repo": "swesmith/calc__calc.0000aaaa",
        "patch": patches().bug,
        "FAIL_TO_PASS": ["tests/test_ops.py::test_div"],
        "PASS_TO_PASS": ["tests/test_ops.py::test_add", "tests/test_ops.py::test_sub"],
        "created_at": "2026-01-01",
        "image_name": image,
        "base_commit": base_commit(),
        "problem_statement": "div(6, 3) returns 18 instead of 2.",
    }


def rebench_row(image: str) -> dict[str, object]:
    """SWE-rebench V2: install_config carries test_cmd and log_parser; image WORKDIR."""
    p = patches()
    return {
        "instance_id": "calc__calc-9",
        "repo": "calc/calc",
        "base_commit": base_commit(),
        "patch": p.gold,
        "test_patch": p.test,
        "problem_statement": PROBLEM,
        "hints_text": "",
        "FAIL_TO_PASS": json.dumps(F2P),
        "PASS_TO_PASS": json.dumps(P2P),
        "install_config": {"test_cmd": "pytest -rA tests/test_ops.py", "log_parser": "pytest"},
        "image_name": image,
    }


def r2e_row(image: str) -> dict[str, object]:
    """R2E-Gym: no instance_id; docker_image; hidden tests; expected_output_json."""
    expected = {"test_div_zero": "PASSED", "test_div": "PASSED"}
    return {
        "repo_name": "calc",
        "docker_image": image,
        "commit_hash": base_commit(),
        "problem_statement": PROBLEM,
        "expected_output_json": json.dumps(expected),
        "modified_files": ["calc/ops.py"],
        "num_non_test_files": 1,
    }


def write_jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path
