"""Usage per session, from the sandbox's cgroup: a session that burns one CPU second
and holds 200 MB shows both, within 20%, while it lives (`orsbox ps`, the status page)
and in its episode record after. (CPU is compared past what the idle session had used
by then: starting the sandbox and its guest costs a tenth of a second or two.)"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

import httpx

from tests.monitoring.conftest import Episode, orsbox, wait_for_episode
from tests.servers import LiveServer

MB = 10**6
WORK = (
    "python3 -c \"import time; b = b'x' * (200 * 10**6); t = time.process_time()\n"
    'while time.process_time() - t < 1.0: pass\nprint(len(b))"'
)


def within(measured: float, expected: float, tolerance: float = 0.2) -> bool:
    return abs(measured - expected) <= tolerance * expected


def ps_usage(sid: str) -> tuple[float, int]:
    """CPU seconds and peak memory bytes of the session's sandbox, as `orsbox ps` shows."""
    listed = orsbox("ps", env={**os.environ, "COLUMNS": "300"})  # rows unwrapped
    assert listed.returncode == 0, listed.stderr
    row = next(line for line in listed.stdout.splitlines() if sid[:16] in line)
    cpu, memory = re.search(r"(\d+\.\d\d)s\s+│\s+(\d+)MiB", row).groups()  # type: ignore[union-attr]
    return float(cpu), int(memory) * 2**20


def test_usage_of_a_busy_session(coding_server: tuple[LiveServer, Path]) -> None:
    server, db = coding_server
    episode = Episode(server, "coding")
    episode.create()
    idle_cpu, _ = ps_usage(episode.sid)  # the sandbox's start and the agent's own share
    assert idle_cpu < 0.5
    assert (
        episode.call("bash", command=WORK)
        .result()["output"]["blocks"][0]["text"]
        .startswith(str(200 * MB))
    )

    cpu, memory = ps_usage(episode.sid)
    assert within(cpu - idle_cpu, 1.0) and within(memory, 200 * MB), (cpu, idle_cpu, memory)

    page = httpx.get(f"{server.url}/ui/live").text
    assert episode.sid[:8] in page and "coding" in page

    episode.delete()
    usage = json.loads(wait_for_episode(db, episode.sid)["usage"])
    assert within(usage["cpu_s"] - idle_cpu, 1.0), (usage, idle_cpu)
    assert within(usage["peak_memory_bytes"], 200 * MB), usage
    assert usage["calls"] == 1 and usage["output_bytes"] > 0 and usage["wall_s"] >= 1.0
