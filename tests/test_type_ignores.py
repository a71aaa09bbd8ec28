"""Every `type: ignore` in orsbox/ names its error code and, after it, its reason.

mypy ([tool.mypy] in pyproject.toml, run by scripts/test.sh) enforces the code
(`ignore-without-code`) and fails an ignore that hides nothing (`warn_unused_ignores`);
the reason is a house rule only a reader can judge, so here it must at least be there:
`# type: ignore[code]  # why`."""

from __future__ import annotations

import re
from pathlib import Path

PACKAGE_ROOT = Path(__file__).resolve().parent.parent / "orsbox"
IGNORE = re.compile(r"#\s*type:\s*ignore\b")
WITH_REASON = re.compile(r"#\s*type:\s*ignore\[[a-z-]+(?:,\s*[a-z-]+)*\]\s+#\s*\S")


def unexplained(text: str) -> list[int]:
    """The line numbers of ignores without a code and a reason after it."""
    return [
        number
        for number, line in enumerate(text.splitlines(), 1)
        if IGNORE.search(line) and not WITH_REASON.search(line)
    ]


def test_every_ignore_in_the_package_names_its_code_and_reason() -> None:
    found = [
        f"{path.relative_to(PACKAGE_ROOT.parent)}:{number}"
        for path in sorted(PACKAGE_ROOT.rglob("*.py"))
        for number in unexplained(path.read_text(encoding="utf-8"))
    ]
    assert not found, "type: ignore without `[code]  # reason`: " + ", ".join(found)


def test_the_rule_itself() -> None:
    assert unexplained("x = f()  # type: ignore[arg-type]  # the stubs say int") == []
    assert unexplained("x = f()  # type: ignore[arg-type, misc]  # two codes") == []
    assert unexplained("x = f()  # type: ignore[arg-type]") == [1]
    assert unexplained("x = f()  # type: ignore  # no code") == [1]
    assert unexplained("x = f()  # type: ignore") == [1]
    assert unexplained("x = f()\ny = g()  # type:ignore[misc]") == [2]
