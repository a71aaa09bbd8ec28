"""Usage per session, from the sandbox's cgroup: a session that burns one CPU second
and holds 200 MB shows both while it lives (`orsbox ps`, the status page) and in its
episode record after: the memory within 20%, the CPU as the work's own count of it
(user + system: faulting in 200 MB costs more of it on a loaded machine), plus at most
a few tenths for the exec around it. (CPU is compared past what the idle session had
used by then: starting the sandbox and its guest costs a tenth of a second or two.)"""

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
    "python3 -c \"import os, time; b = b'x' * (200 * 10**6); t = time.process_time()\n"
    'while time.process_time() - t < 1.0: pass\nprint(len(b), sum(os.times()[:2]))"'
)
EXEC_OVERHEAD_S = 0.3  # the shell and the guest around the work, on a loaded machine


def within(measured: float, expected: float, tolerance: float = 0.2) -> bool:
    return abs(measured - expected) <= tolerance * expected


def accounts_for(measured_cpu_s: float, own_cpu_s: float) -> bool:
    """Whether the sandbox's CPU figure is the work's own count, and not much more."""
    return own_cpu_s - 0.05 <= measured_cpu_s <= own_cpu_s + EXEC_OVERHEAD_S


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
    printed = episode.call("bash", command=WORK).result()["output"]["blocks"][0]["text"]
    length, own_cpu = printed.split()
    assert int(length) == 200 * MB and float(own_cpu) >= 1.0, printed

    cpu, memory = ps_usage(episode.sid)
    assert accounts_for(cpu - idle_cpu, float(own_cpu)), (cpu, idle_cpu, own_cpu)
    assert within(memory, 200 * MB), memory

    page = httpx.get(f"{server.url}/ui/live").text
    assert episode.sid[:8] in page and "coding" in page

    episode.delete()
    usage = json.loads(wait_for_episode(db, episode.sid)["usage"])
    assert accounts_for(usage["cpu_s"] - idle_cpu, float(own_cpu)), (usage, idle_cpu, own_cpu)
    assert within(usage["peak_memory_bytes"], 200 * MB), usage
    assert usage["calls"] == 1 and usage["output_bytes"] > 0 and usage["wall_s"] >= 1.0
