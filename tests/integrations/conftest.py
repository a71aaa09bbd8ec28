"""Integration tests run the harness itself (Inspect) against real orsbox sandboxes; they
are skipped, with the install command, where the harness is not installed."""

from __future__ import annotations

import pytest


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "tests/integrations" in str(item.fspath):
            item.add_marker(pytest.mark.docker)
