"""The gVisor memory watch's race (docs/gvisor.md, 'oom'): eight processes of 200 MiB
allocating at once in a 512 MiB sandbox, with CPU-bound host processes beside, as a
hostile or careless command would. The guest's watch kills the largest while the memory
in use inside is past the sandbox's; what it has not caught in time lands on the host
cgroup, whose bound (the sandbox's memory plus room) the host's OOM killer enforces by
killing gVisor's processes, which leaves the sandbox stuck until its call times out.

    python -m bench.gvisor_memory_race [RUNS] [--beside N] [--image IMAGE]

For each run, a fresh sandbox on the private runsc engine (scripts/start-runsc-engine.sh,
`ORSBOX_RUNSC_SOCKET`); the host cgroup's memory use sampled every 5 ms from outside
(cgroup v1 `memory.usage_in_bytes`). Prints one JSON object: the peaks' distribution,
how many runs reached the host's bound, how many bomb processes the watch killed, and
how many runs' sandboxes did not come through (the call timed out or the sandbox was
lost)."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import subprocess
import sys
import threading
import time

from bench.gvisor import ENGINE, MEMORY_CGROUP, MIB
from orsbox.errors import SandboxGone
from orsbox.sandbox import SandboxLimits, SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.docker.config import DockerConfig
from orsbox.sandbox.docker.options import gvisor_host_memory

LIMITS = SandboxLimits(memory_bytes=512 * MIB)
BOMB = (
    "for i in $(seq 8); do"
    ' python3 -c "b = bytearray(200 * 1024**2); import time; time.sleep(5)" &'
    " done; wait; echo waited"
)
# a CPU-bound process that ends with the bench even if the bench is killed
BURNER = "import os\nparent = os.getppid()\nwhile os.getppid() == parent: pass"


class PeakSampler:
    """The host cgroup's largest memory use while it runs, sampled every 5 ms."""

    def __init__(self, container_id: str) -> None:
        self.path = MEMORY_CGROUP / container_id / "memory.usage_in_bytes"
        self.peak = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def _sample(self) -> None:
        while not self._stop.is_set():
            try:
                self.peak = max(self.peak, int(self.path.read_text()))
            except (OSError, ValueError):
                return  # the container is gone
            time.sleep(0.005)

    def __enter__(self) -> PeakSampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


async def one_run(backend: DockerBackend, image: str, beside: int, index: int) -> dict[str, object]:
    sandbox = await backend.start(
        SandboxSpec(image=image, session_id=f"memory-race-{index}", limits=LIMITS)
    )
    burners = [subprocess.Popen([sys.executable, "-c", BURNER]) for _ in range(beside)]
    try:
        with PeakSampler(sandbox.id) as sampler:
            result = await sandbox.shell(BOMB, timeout_s=60)
        came_through = "waited" in result.output and not result.timed_out
        kills = len(re.findall(r"out of memory: killed process", result.output))
    except SandboxGone:
        came_through, kills = False, -1
    finally:
        for burner in burners:
            burner.kill()
            burner.wait()
        await sandbox.close()
    return {"peak_mib": sampler.peak // MIB, "kills": kills, "came_through": came_through}


async def measure(runs: int, beside: int, image: str) -> dict[str, object]:
    config = DockerConfig(engine=ENGINE, runtime="runsc")
    backend = DockerBackend(config=config, server_id=f"bench-memory-race-{os.getpid()}")
    bound = gvisor_host_memory(LIMITS) // MIB
    found = []
    try:
        for index in range(runs):
            found.append(await one_run(backend, image, beside, index))
    finally:
        await backend.close()
    peaks = sorted(int(r["peak_mib"]) for r in found)  # type: ignore[call-overload]
    return {
        "runs": runs,
        "beside": beside,
        "host_bound_mib": bound,
        "peak_mib": {"min": peaks[0], "p50": peaks[len(peaks) // 2], "max": peaks[-1]},
        "at_the_bound": sum(p >= bound - 1 for p in peaks),
        "kills": sorted(int(r["kills"]) for r in found),  # type: ignore[call-overload]
        "did_not_come_through": sum(not r["came_through"] for r in found),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("runs", type=int, nargs="?", default=30)
    parser.add_argument("--beside", type=int, default=2, help="CPU-bound host processes")
    parser.add_argument("--image", default="orsbox/base:latest")
    args = parser.parse_args()
    print(json.dumps(asyncio.run(measure(args.runs, args.beside, args.image))))


if __name__ == "__main__":
    main()
