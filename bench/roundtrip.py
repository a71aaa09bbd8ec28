"""Round trip of `bash echo hi` through the whole stack: HTTP + SSE + session lookup +
in-container shell and back, against a real server on loopback.

    python bench/roundtrip.py [--calls 1000]

Prints p50/p90/p99 in milliseconds. (The fuller side-by-side suite is issue 5's.)"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import uuid
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.servers import start_server


def call(client: httpx.Client, sid: str, command: str) -> str:
    body = {"name": "bash", "input": {"command": command}}
    with client.stream("POST", "/onlybash/call", json=body, headers={"X-Session-ID": sid}) as r:
        for line in r.iter_lines():
            if line.startswith("data: {"):
                return line
    raise RuntimeError("no result")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--calls", type=int, default=1000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        server = start_server(
            ["tests/envs/container_envs.py:OnlyBash"], Path(tmp), log_level="warning"
        )
        try:
            with httpx.Client(base_url=server.url, timeout=60) as client:
                sid = uuid.uuid4().hex
                client.post(
                    "/create",
                    headers={"X-Session-ID": sid},
                    json={"env_name": "onlybash", "task_spec": {}},
                )
                for _ in range(50):
                    call(client, sid, "echo hi")
                samples = []
                for _ in range(args.calls):
                    started = time.perf_counter()
                    assert '"hi\\n"' in call(client, sid, "echo hi")
                    samples.append((time.perf_counter() - started) * 1000)
                client.post("/delete", headers={"X-Session-ID": sid})
        finally:
            server.stop()
    q = statistics.quantiles(samples, n=100)
    print(
        f"bash 'echo hi' via HTTP+SSE, {args.calls} calls: p50 {q[49]:.2f} ms  p90 {q[89]:.2f} ms  p99 {q[98]:.2f} ms"
    )


if __name__ == "__main__":
    main()
