"""A Harbor task shaped like a Terminal-Bench 2.0 one, with Harbor 0.26's per-phase
network: no network for the agent, an allow-list for the verifier, whose test.sh fetches
its test runner at grading time (as TB2's fetch theirs) through the egress proxy. Both
the runner's host and the host off the list are local test servers (names resolved to
loopback through the proxy's hosts file, which the operator's ORSBOX_EGRESS_ALLOW
names); nothing leaves this machine. Graded through `orsbox check` and the ors-sdk
client."""

from __future__ import annotations

import http.server
import json
import os
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from ors.client import ORS

from tests.environments.conftest import orsbox
from tests.formats.harbor.tasks import write
from tests.network.hosts import probe
from tests.servers import LiveServer, start_server

pytestmark = [pytest.mark.docker]

RUNNER_HOST, OFF_LIST_HOST = "runner.orsbox.test", "elsewhere.orsbox.test"

TASK_TOML = """
schema_version = "1.4"

[task]
name = "orsbox-tests/phased"
description = "Terminal-Bench 2.0 shaped: the verifier fetches its runner"

[agent]
timeout_sec = 300.0
network_mode = "no-network"

[verifier]
timeout_sec = 120.0
user = "root"
network_mode = "allowlist"
allowed_hosts = ["{runner_host}"]

[environment]
docker_image = "orsbox/base:latest"
memory_mb = 512
workdir = "/tmp"
"""

# Fetches its runner from the allowed host and tries the one off the list, as a TB2
# verifier fetches uv and its pytest; never stops on a failed step (TB2's don't).
TEST_SH = """
#!/bin/bash
mkdir -p /logs/verifier
python3 - <<'PY'
import urllib.error, urllib.request
def fetch(url):
    try:
        return urllib.request.urlopen(url, timeout=10).read()
    except urllib.error.HTTPError as e:
        return f"refused {{e.code}}".encode()
    except OSError as e:
        return f"failed {{e}}".encode()
open("/tmp/runner.py", "wb").write(fetch("http://{runner_host}:{port}/runner.py"))
print("off the list:", fetch("http://{off_list_host}:{port}/runner.py").decode())
PY
if python3 /tmp/runner.py; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""

RUNNER = """
import pathlib, sys
out = pathlib.Path("/tmp/out.txt")
ok = out.exists() and out.read_text().strip() == "hello"
print("runner: PASSED" if ok else "runner: FAILED")
sys.exit(0 if ok else 1)
"""


class _Runner(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = RUNNER.encode()
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture(scope="module")
def runner_port() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Runner)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield server.server_address[1]
    server.shutdown()
    server.server_close()


@pytest.fixture(scope="module")
def task(tmp_path_factory: pytest.TempPathFactory, runner_port: int) -> Path:
    folder = tmp_path_factory.mktemp("phased") / "phased"
    values = {"runner_host": RUNNER_HOST, "off_list_host": OFF_LIST_HOST, "port": runner_port}
    return write(
        folder,
        {
            "task.toml": TASK_TOML.format(**values),
            "instruction.md": "Write hello into /tmp/out.txt.\n",
            "tests/test.sh": TEST_SH.format(**values),
            "solution/solve.sh": "#!/bin/bash\necho hello > /tmp/out.txt\n",
        },
    )


@pytest.fixture(scope="module")
def operator_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Only the allow-list is allowed (not the internet); loopback names for the proxy."""
    hosts = tmp_path_factory.mktemp("proxy") / "hosts"
    hosts.write_text(f"127.0.0.1 {RUNNER_HOST} {OFF_LIST_HOST}\n")
    backend = {"type": "docker", "egress_proxy_hosts_file": str(hosts)}
    return {
        "ORSBOX_ALLOW_NETWORK_ALLOWLIST": "1",
        "ORSBOX_EGRESS_ALLOW": "127.0.0.1/32",
        "ORSBOX_BACKEND": json.dumps(backend),
    }


@pytest.fixture(scope="module")
def server(
    task: Path, operator_env: dict[str, str], tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    settings = {k.removeprefix("ORSBOX_").lower(): v for k, v in operator_env.items()}
    live = start_server([str(task), "--name", "phased"], tmp_path_factory.mktemp("srv"), **settings)
    yield live
    live.stop()


def play(server: LiveServer, commands: list[str]) -> tuple[list[str], object]:
    with ORS(base_url=server.url) as client:
        env = client.environment("phased")
        with env.session(split="test", index=0) as session:
            outputs = [session.call_tool("bash", {"command": c}).blocks[0].text for c in commands]
            return outputs, session.call_tool("submit", {})


def test_agent_phase_has_no_route_out_and_the_verifier_only_its_list(
    server: LiveServer, runner_port: int
) -> None:
    interfaces, fetched = play(
        server,
        [
            "ls /sys/class/net",
            probe(f"http://{RUNNER_HOST}:{runner_port}/runner.py"),
            "echo hello > /tmp/out.txt",
        ],
    )[0][:2]
    assert interfaces.split() == ["lo"]
    assert "200" not in fetched and ("error" in fetched or "timeout" in fetched), fetched


def test_solution_scores_one_and_untouched_zero_through_the_client(server: LiveServer) -> None:
    _, solved = play(server, ["echo hello > /tmp/out.txt"])
    _, untouched = play(server, [])
    assert (solved.reward, solved.finished) == (1.0, True)  # type: ignore[attr-defined]
    assert (untouched.reward, untouched.finished) == (0.0, True)  # type: ignore[attr-defined]
    text = solved.blocks[0].text  # type: ignore[attr-defined]
    assert "runner: PASSED" in text and "off the list: refused 403" in text, text


def test_orsbox_check_scores_the_solution_one(task: Path, operator_env: dict[str, str]) -> None:
    done = orsbox("check", str(task), env={**os.environ, **operator_env}, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert re.search(r"│ phased\s+│ 1\s+│ 0\s+│ ok", done.stdout), done.stdout


def test_without_the_allowlist_setting_the_task_is_refused(task: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("ORSBOX_ALLOW_NETWORK")}
    done = orsbox("check", str(task), env=env)
    assert done.returncode != 0
    assert "verifier.network_mode" in done.stdout + done.stderr
    assert "ORSBOX_ALLOW_NETWORK_ALLOWLIST=1" in done.stdout + done.stderr
