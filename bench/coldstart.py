"""Cold start against the engine's floor: orsbox's create -> first call beside bare
Docker's, all of one image, interleaved sample by sample so each sees the same load.

* orsbox, sandbox API: `DockerBackend.start` + `shell("true")`, in this process;
* orsbox, HTTP: `/create` on a server without a warm pool + one `bash` call (`echo hi`);
* `docker run -d`: create + start through the docker SDK (init, no network, as the
  burst baseline), and the same + one `exec true` (exec create + start, to its end);
* the docker CLI's `docker run -d` and `docker run -d` + `docker exec ... true`, for
  reference (each also pays a CLI process start).

Targets, from the issues: create -> first call p50 <= SDK `run -d` + `exec` p50 + 50 ms
(issue 17), and <= SDK `run -d` p50 + 100 ms (the SWE-bench and Harbor issues). Removing
a container is outside every timing."""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Awaitable, Callable

from bench import create
from bench.harness import BENCH_LABEL, Bench, load
from bench.stats import Row, ms, summary
from orsbox.sandbox import SandboxSpec
from orsbox.sandbox.docker import DockerBackend


def sdk_run(bench: Bench, exec_true: bool, image: str | None = None) -> float:
    api = bench.docker.api
    started = time.perf_counter()
    config = api.create_host_config(init=True, network_mode="none")
    labels = {BENCH_LABEL: bench.run_id}
    cid = api.create_container(
        image or bench.image, ["sleep", "infinity"], labels=labels, host_config=config
    )
    api.start(cid["Id"])
    if exec_true:
        api.exec_start(api.exec_create(cid["Id"], ["true"])["Id"])
    elapsed = (time.perf_counter() - started) * 1000
    api.remove_container(cid["Id"], force=True)
    return elapsed


def cli_run(bench: Bench, exec_true: bool) -> float:
    started = time.perf_counter()
    argv = ["docker", "run", "-d", "--init", "--network", "none"]
    argv += ["--label", f"{BENCH_LABEL}={bench.run_id}", bench.image, "sleep", "infinity"]
    cid = subprocess.run(argv, capture_output=True, text=True, check=True).stdout.strip()
    if exec_true:
        subprocess.run(["docker", "exec", cid, "true"], check=True)
    elapsed = (time.perf_counter() - started) * 1000
    subprocess.run(["docker", "rm", "-f", cid], capture_output=True, check=True)
    return elapsed


async def sandbox_api(backend: DockerBackend, image: str) -> float:
    started = time.perf_counter()
    sandbox = await backend.start(SandboxSpec(image=image, session_id="bench-cold"))
    result = await sandbox.shell("true")
    elapsed = (time.perf_counter() - started) * 1000
    await sandbox.close()
    assert result.exit_code == 0, result
    return elapsed


async def run(bench: Bench) -> list[Row]:
    repeats = bench.scale(30, 4)
    server = bench.start_server("coldstart", ["Shell"])
    backend = DockerBackend(server_id=f"bench-{bench.run_id}-api")
    kinds: dict[str, Callable[[], Awaitable[float]]] = {
        "orsbox sandbox API": lambda: sandbox_api(backend, bench.image),
        "orsbox HTTP": lambda: create.create_to_first_call(server),
        "sdk run -d": lambda: asyncio.to_thread(sdk_run, bench, False),
        "sdk run -d + exec": lambda: asyncio.to_thread(sdk_run, bench, True),
        "cli run -d": lambda: asyncio.to_thread(cli_run, bench, False),
        "cli run -d + exec": lambda: asyncio.to_thread(cli_run, bench, True),
    }
    samples: dict[str, list[float]] = {name: [] for name in kinds}
    loads = [load()]
    try:
        for measure in kinds.values():  # warm-up: imports, first engine calls
            await measure()
        for _ in range(repeats):
            for name, measure in kinds.items():
                samples[name].append(await measure())
        loads.append(load())
    finally:
        await backend.close()
        await bench.stop(server)
    stats = {name: summary(values) for name, values in samples.items()}
    bench.raw["coldstart"] = {"create_to_first_call_ms": stats, "load": loads}
    return rows(stats, loads)


def rows(stats: dict[str, dict[str, float]], loads: list[str]) -> list[Row]:
    run_p50 = stats["sdk run -d"]["p50"]
    floor = stats["sdk run -d + exec"]["p50"]
    baseline = f"run {ms(run_p50)}, run+exec {ms(floor)} (load {' -> '.join(loads)})"
    out = []
    for name in ("orsbox sandbox API", "orsbox HTTP"):
        s = stats[name]
        target = f"≤ run+exec + 50 ms, ≤ run + 100 ms ({ms(min(floor + 50, run_p50 + 100))})"
        met = s["p50"] <= floor + 50 and s["p50"] <= run_p50 + 100
        figure = f"{ms(s['p50'])} ({ms(s['p95'])})"
        out.append(
            Row(
                "coldstart",
                f"{name}: create -> first call p50 (p95)",
                figure,
                baseline,
                target,
                met,
            )
        )
    for name in ("sdk run -d", "sdk run -d + exec", "cli run -d", "cli run -d + exec"):
        s = stats[name]
        out.append(
            Row("coldstart", f"baseline {name} p50 (p95)", f"{ms(s['p50'])} ({ms(s['p95'])})")
        )
    return out
