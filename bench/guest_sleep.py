"""The guest's sleep (`DockerConfig.guest_sleep_after_s`): what a call costs awake and
what the call that wakes a sleeping guest costs, p50 and p95, the guest's own CPU a
call (its process's user and system time, which an exec keeps: a mean over the samples,
the kernel counting in 10 ms ticks), and the container's own memory (cgroup usage less
inactive file cache, as `bench.scale` counts it) awake and asleep, on one sandbox of the
main engine.

    python -m bench.guest_sleep [SAMPLES] [--image IMAGE] [--bash-sleeper]

The guest sleeps as the native sleeper (`orsbox/sandbox/guest/sleeper/`), which answers
a plain call itself: its "waking" call wakes nothing. `--bash-sleeper` measures the
waiting bash instead (no sleeper sent: ORSBOX_SLEEPER_CC=none), whose every call after
a sleep starts python again.

Whether the guest sleeps is read from outside, by a process the engine enters in the
container (`docker exec`: the guest's sleep ignores processes entered from outside),
never through the guest. Prints one JSON object."""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import time

import docker

from bench.engine_use import container_memory
from bench.guest_start import summary
from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from orsbox.sandbox.docker.config import DockerConfig
from orsbox.sandbox.guest.inside.sleep import SLEEPER_NAME
from orsbox.sandbox.guest.sleeper import CC_VARIABLE

SLEEP_AFTER_S = 0.2
FIRST_CHILD_OF_INIT = (
    "cut -d' ' -f1 /proc/1/task/1/children | xargs -I{} cat /proc/{}/cmdline | tr '\\0' '\\n'"
    " | head -1"
)


async def until_asleep(container: docker.models.containers.Container) -> None:
    """Until the guest (the first child of the container's init) sleeps: the native
    sleeper, or the waiting bash."""
    while True:
        _, output = await asyncio.to_thread(container.exec_run, ["bash", "-c", FIRST_CHILD_OF_INIT])
        if output.decode().strip() in (SLEEPER_NAME, "bash"):
            return
        await asyncio.sleep(0.02)


def guest_cpu_ms(container: docker.models.containers.Container) -> float:
    """The guest's CPU so far: the first child of the container's init, seen from the
    host (its pid stays the same through the sleep's and the wake's execs)."""
    init = container.attrs["State"]["Pid"]
    with open(f"/proc/{init}/task/{init}/children") as f:
        guest = f.read().split()[0]
    with open(f"/proc/{guest}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime
    return ticks * 1000 / os.sysconf("SC_CLK_TCK")


async def timed_call(sandbox: object) -> float:
    started = time.perf_counter()
    result = await sandbox.shell("true")  # type: ignore[attr-defined]
    assert result.exit_code == 0, result.output
    return (time.perf_counter() - started) * 1000


async def measure(samples: int, image: str) -> dict[str, object]:
    config = DockerConfig(guest_sleep_after_s=SLEEP_AFTER_S)
    backend = DockerBackend(server_id=f"bench-guest-sleep-{os.getpid()}", config=config)
    client = docker.from_env()
    sandbox = await backend.start(SandboxSpec(image=image, session_id="bench-guest-sleep"))
    try:
        container = client.containers.get(sandbox.id)
        await timed_call(sandbox)  # the shell started, warm
        cpu_before = guest_cpu_ms(container)
        awake = [await timed_call(sandbox) for _ in range(samples)]
        awake_cpu = (guest_cpu_ms(container) - cpu_before) / samples
        awake_memory = container_memory(sandbox.id)
        await until_asleep(container)
        asleep_memory = container_memory(sandbox.id)
        woken = []
        cpu_before = guest_cpu_ms(container)
        for _ in range(samples):
            await until_asleep(container)
            woken.append(await timed_call(sandbox))
        await until_asleep(container)  # the last one's sleep counted too, as the others'
        waking_cpu = (guest_cpu_ms(container) - cpu_before) / samples
        return {
            "awake_call_ms": summary(awake),
            "waking_call_ms": summary(woken),
            "guest_cpu_ms_a_call": {
                "awake": round(awake_cpu, 2),
                "waking (with the sleep before it)": round(waking_cpu, 2),
            },
            "container_memory_kib": {
                "awake": awake_memory // 1024,
                "asleep": asleep_memory // 1024,
            },
            "image": image,
            "sleeper": "bash" if os.environ.get(CC_VARIABLE) == "none" else "native",
        }
    finally:
        await sandbox.close()
        await backend.close()
        client.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("samples", type=int, nargs="?", default=50)
    parser.add_argument("--image", default="orsbox/base:latest")
    parser.add_argument("--bash-sleeper", action="store_true", help="no native sleeper")
    args = parser.parse_args()
    if args.bash_sleeper:
        os.environ[CC_VARIABLE] = "none"
    print(json.dumps(asyncio.run(measure(args.samples, args.image))))


if __name__ == "__main__":
    main()
