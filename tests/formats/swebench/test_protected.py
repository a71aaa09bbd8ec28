"""Which changed files the strict verdict drops, and how a patch is cut per file (no
containers: the Docker tests in test_strict.py grade with them)."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orsbox.formats.swebench import protected
from orsbox.formats.swebench.strict import header_path, split_patch

ALWAYS = [
    "conftest.py",
    "src/pkg/conftest.py",
    "tests/test_x.py",
    "tests/helpers.py",
    "pkg/tests/data/case.json",
    "testing/util.py",
    "pkg/test_unit.py",
    "pkg/unit_test.py",
    "pkg/tests.py",
    "pytest.ini",
    ".pytest.ini",
    "tox.ini",
    "sitecustomize.py",
    "lib/usercustomize.py",
    "calc.pth",
]
SOURCE = ["calc/ops.py", "calc/testutils_not.py", "docs/testing.md", "setup.py", "README.md"]


@pytest.mark.parametrize("path", ALWAYS)
def test_always_protected(path: str) -> None:
    assert protected.always_protected(path)


@pytest.mark.parametrize("path", SOURCE)
def test_source_is_not(path: str) -> None:
    assert not protected.always_protected(path)


def test_the_test_patch_files_are_protected() -> None:
    assert protected.always_protected("calc/fixtures.py", ["calc/fixtures.py"])


PYPROJECT = (
    '[project]\nname = "calc"\ndependencies = []\n\n[tool.pytest.ini_options]\naddopts = "-q"\n'
)


@pytest.mark.parametrize(
    ("path", "old", "new", "protected_"),
    [
        ("pyproject.toml", PYPROJECT, PYPROJECT.replace("[]", '["attrs"]'), False),
        ("pyproject.toml", PYPROJECT, PYPROJECT.replace('"-q"', '"-p x"'), True),
        ("pyproject.toml", "", '[tool.pytest.ini_options]\naddopts = "-p x"\n', True),
        (
            "pyproject.toml",
            PYPROJECT,
            PYPROJECT + '\n[project.scripts]\ncalc-add = "calc.cli:main"\n',
            False,
        ),
        (
            "pyproject.toml",
            PYPROJECT,
            PYPROJECT + '\n[project.entry-points.pytest11]\nx = "calc.plugin"\n',
            True,
        ),
        ("pyproject.toml", PYPROJECT, "[[not toml", True),
        ("setup.cfg", "[metadata]\nname = calc\n", "[metadata]\nname = calc2\n", False),
        ("setup.cfg", "[metadata]\nname = calc\n", "[tool:pytest]\naddopts = -p x\n", True),
        ("setup.cfg", "", "[options.entry_points]\npytest11 =\n    x = calc.plugin\n", True),
        ("setup.py", "setup(name='a')", "setup(name='b')", False),
        (
            "pyproject.toml",
            "",
            '[tool.poetry.plugins.pytest11]\nx = "calc.plugin"\n',
            True,
        ),
        ("setup.py", "setup()", "setup(entry_points={'pytest11': ['x = calc.x']})", True),
    ],
)
def test_mixed_config_files_by_what_changed(
    path: str, old: str, new: str, protected_: bool
) -> None:
    assert protected.needs_content(path)
    assert protected.config_change_is_protected(path, old, new) is protected_


def test_split_patch_per_file_with_odd_names(tmp_path: Path) -> None:
    """git's own diff, binary and quoted (non-ASCII, space) paths included, cut per file
    and put back together byte for byte."""
    repo = tmp_path / "r"
    repo.mkdir()

    def git(*args: str) -> str:
        done = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, check=True)
        return done.stdout.decode("utf-8", errors="surrogateescape")

    git("init", "-q")
    (repo / "a.py").write_text("x = 1\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "base")
    (repo / "a.py").write_text("x = 2\n")
    (repo / "dir with space").mkdir()
    (repo / "dir with space" / "conftest.py").write_text("diff --git a/x b/x\n")
    (repo / "café.py").write_text("y = 1\n")
    (repo / "blob.bin").write_bytes(b"\x00\x01\xff")
    git("add", "-A")
    patch = git("diff", "--cached", "--binary", "--no-renames")
    files = split_patch(patch)
    assert [f.path for f in files] == ["a.py", "blob.bin", "café.py", "dir with space/conftest.py"]
    assert "".join(f.text for f in files) == patch
    assert header_path('diff --git "a/caf\\303\\251.py" "b/caf\\303\\251.py"') == "café.py"
