"""Schemathesis against orsbox's own OpenAPI schema (`/openapi.json` of a real server
with the protocol test environments): no server error, no response the schema does not
describe (status, content type, headers, body), the token enforced where it is declared.

Every check runs but `positive_data_acceptance`, which expects every schema-valid
request to succeed: an unknown split, an index past the end or an unknown session are
400/404 as the ORS spec says, and no schema can know a server's splits or sessions.
Bounded: a few examples per operation and phase, about half a minute in all.
"""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from tests.conftest import PROTOCOL_ENVS
from tests.servers import LiveServer, start_server

CONFIG = Path(__file__).with_name("schemathesis.toml")
TOKEN = "fuzz-" + uuid.uuid4().hex
MAX_EXAMPLES = 25
RUN_TIMEOUT_S = 150
AUTH = f"Authorization: Bearer {TOKEN}"
SESSION_PATHS = r"^/(ping|\{env_name\}/(prompt|task_tools|call))$"


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    live = start_server(
        PROTOCOL_ENVS,
        tmp_path_factory.mktemp("fuzz"),
        token=TOKEN,
        setup_wait_s=1,
        session_timeout_s=30,
        max_body_bytes=100_000,
    )
    yield live
    live.stop()


def schemathesis(server: LiveServer, *options: str) -> None:
    command = [
        *(sys.executable, "-m", "schemathesis.cli", "--config-file", str(CONFIG)),
        *("run", f"{server.url}/openapi.json"),
        *("--checks", "all", "--exclude-checks", "positive_data_acceptance"),
        *("--max-examples", str(MAX_EXAMPLES), "--request-timeout", "10", "--no-color"),
        *("--header", AUTH, *options),
    ]
    run = subprocess.run(
        command,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT_S,
        env={**os.environ, "NO_COLOR": "1"},
        cwd=server.log_path.parent,  # its report folder lands in the test's tmp
    )
    assert run.returncode == 0, run.stdout[-20_000:] + run.stderr[-5_000:]


def test_every_operation_answers_as_the_schema_says(server: LiveServer) -> None:
    schemathesis(server)
    assert "internal error" not in server.log()


def test_session_operations_with_a_live_session(server: LiveServer) -> None:
    """Random session ids only ever reach the 404 path; this run uses a real one. Only
    valid requests: a fixed header would replace the invalid values negative cases
    generate for it (the run above sends those)."""
    sid = uuid.uuid4().hex
    headers = {"Authorization": f"Bearer {TOKEN}", "X-Session-ID": sid}
    # the second environment: its one tool cannot sleep or block, whatever input comes
    body = {"env_name": "second_env", "split": "validation", "index": 0}
    assert httpx.post(f"{server.url}/create", json=body, headers=headers).status_code == 200
    try:
        schemathesis(
            server,
            *("--header", f"X-Session-ID: {sid}", "--mode", "positive"),
            *("--include-path-regex", SESSION_PATHS),
        )
    finally:
        httpx.post(f"{server.url}/delete", headers=headers)
    assert "internal error" not in server.log()


SANDBOX_PATHS = (
    r"^/(create_sandbox|run|stat_file|read_file|write_file|set_network|ping|delete_session)$"
)


@pytest.mark.docker
def test_the_sandbox_api_answers_as_the_schema_says(tmp_path: Path) -> None:
    """The same checks on the sandbox API's operations (no image the fuzzer makes up is
    on the allow-list, so no container starts)."""
    live = start_server(
        PROTOCOL_ENVS, tmp_path, token=TOKEN, sandbox_api=1, setup_wait_s=1, max_body_bytes=100_000
    )
    try:
        schemathesis(live, "--include-path-regex", SANDBOX_PATHS)
        assert "internal error" not in live.log()
    finally:
        live.stop()
