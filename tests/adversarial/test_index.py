"""Every test `ITEMS` names exists, so the suite's index cannot rot silently."""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from tests.adversarial import ITEMS

ROOT = Path(__file__).resolve().parents[2]


@cache
def defined_tests(path: str) -> frozenset[str]:
    tree = ast.parse((ROOT / path).read_text())
    return frozenset(
        node.name
        for node in tree.body
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.name.startswith("test")
    )


def test_every_item_names_existing_tests() -> None:
    missing = [
        node
        for nodes in ITEMS.values()
        for node in nodes
        if node.split("::")[1] not in defined_tests(node.split("::")[0])
    ]
    assert missing == []
    assert all(ITEMS.values())
