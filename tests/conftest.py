from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.servers import LiveServer, start_server

# The openreward client's PyPI update check is network traffic this machine cannot make.
os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")

PROTOCOL_ENVS = ["tests/envs/protocol_envs.py:Protocol", "tests/envs/protocol_envs.py:Second"]


@pytest.fixture(scope="module")
def protocol_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One real server per test module, with short timeouts that tests can observe."""
    tmp = tmp_path_factory.mktemp("server")
    server = start_server(
        PROTOCOL_ENVS,
        tmp,
        session_timeout_s=4,
        reap_interval_s=0.5,
        setup_wait_s=1.5,
        result_linger_s=3,
        max_body_bytes=1_000_000,
    )
    yield server
    server.stop()


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    return tmp_path
