"""`orsbox doctor`: can this machine run sandboxes, and what to do when it cannot.

Three groups of checks, each answer with a fix: the Docker engine answers; the images
the bundled environments need exist; and the engine enforces the limits orsbox sets
(memory, pids, cpus, no network, an init process), proven by a tiny real container
reading its own cgroup, not by trusting `docker info`. Then the network checks
(`doctor_network.py`): the egress guard's rules, put in place and read back, and squid
for allow-listed networks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import typer
from rich.console import Console

from orsbox.sandbox.base import SandboxBackend
from orsbox.sandbox.config import DEFAULT_ENGINE
from orsbox.sandbox.images import BASE_IMAGE

out = Console(highlight=False)

PROBE_MEMORY_BYTES = 64 * 1024**2
PROBE_PIDS = 64
PROBE_CPU_QUOTA = "50000"  # 0.5 cpus in a 100 ms period
PROBE_TIMEOUT_S = 60
PROBE = """
if [ -f /sys/fs/cgroup/memory.max ]; then
    echo "memory=$(cat /sys/fs/cgroup/memory.max)"
    echo "swap=$(cat /sys/fs/cgroup/memory.swap.max 2>/dev/null || echo max)"
    echo "pids=$(cat /sys/fs/cgroup/pids.max)"
    echo "cpus=$(cut -d' ' -f1 /sys/fs/cgroup/cpu.max)"
else
    echo "memory=$(cat /sys/fs/cgroup/memory/memory.limit_in_bytes)"
    echo "swap=$(cat /sys/fs/cgroup/memory/memory.memsw.limit_in_bytes 2>/dev/null || echo max)"
    echo "pids=$(cat /sys/fs/cgroup/pids/pids.max)"
    echo "cpus=$(cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us)"
fi
echo "network=$(ls /sys/class/net | tr '\\n' ' ')"
echo "init=$(cat /proc/1/comm)"
"""
INITS = ("docker-init", "tini", "podman-init")  # PID 1 under init=True: Docker's, Podman's
CGROUP_FIX = (
    "enable the {what} cgroup controller (cgroup v2 needs it delegated to docker; on v1 "
    "add {kernel} to the kernel command line) and restart dockerd"
)


@dataclass
class Check:
    name: str
    ok: bool
    detail: str
    fix: str = ""


def report(check: Check) -> None:
    mark = "[green]ok  [/green]" if check.ok else "[red]FAIL[/red]"
    out.print(f"{mark} {check.name}: {check.detail}")
    if not check.ok and check.fix:
        out.print(f"     [bold]fix:[/bold] {check.fix}")


@dataclass
class Engine:
    """The configured backend's engine as doctor found it: who answers, a client for
    the probes, and whether the base image the probes run in is there."""

    description: str
    client: Any
    has_base: bool


def engine_check() -> tuple[Check, Engine | None]:
    from orsbox.sandbox.config import engine_address, with_backend
    from orsbox.sandbox.docker.engine import connect
    from orsbox.settings import Settings

    config = Settings().backend
    where = getattr(config, "engine", None) or os.environ.get("DOCKER_HOST") or DEFAULT_ENGINE
    try:
        description, has_base = with_backend(config, _describe)
        client = connect(engine_address(config), timeout_s=20)  # type: ignore[arg-type]
    except Exception as e:
        fix = "start one with `bash scripts/start-docker.sh` (it installs docker.io if needed)"
        if os.environ.get("DOCKER_HOST"):
            fix += f", or unset DOCKER_HOST / point it at a running engine (it is {where})"
        return Check("Docker engine", False, f"no Docker engine answers at {where}: {e}", fix), None
    return Check("Docker engine", True, description), Engine(description, client, has_base)


async def _describe(backend: SandboxBackend) -> tuple[str, bool]:
    return await backend.describe(), await backend.images.has(BASE_IMAGE)


def image_checks() -> list[Check]:
    from orsbox.bundle import bundled_targets, image_recipes, needed_images
    from orsbox.cli.build import on_images, present
    from orsbox.targets import resolve_targets

    try:
        wanted = needed_images(resolve_targets(bundled_targets()))
        wanted = list(dict.fromkeys([*(r.tag for r in image_recipes()), *wanted]))
    except Exception as e:
        return [Check("bundled environments", False, str(e), "fix the manifest named above")]
    there = on_images(lambda images: present(images, wanted))
    checks = []
    for tag in wanted:
        ok = tag in there
        detail = "present" if ok else "missing"
        checks.append(Check(f"image {tag}", ok, detail, "run `orsbox build` (about 3 minutes)"))
    return checks


def probe(client: Any, image: str) -> tuple[dict[str, str], list[str]]:
    """Run the probe under orsbox's limits; its readings and docker's warnings."""
    api = client.api
    host_config = api.create_host_config(
        mem_limit=PROBE_MEMORY_BYTES,
        memswap_limit=PROBE_MEMORY_BYTES,
        pids_limit=PROBE_PIDS,
        nano_cpus=500_000_000,
        network_mode="none",
        cap_drop=["ALL"],
        security_opt=["no-new-privileges"],
        init=True,
    )
    created = api.create_container(
        image, ["bash", "-c", PROBE], host_config=host_config, labels={"orsbox.doctor": "1"}
    )
    try:
        api.start(created["Id"])
        api.wait(created["Id"], timeout=PROBE_TIMEOUT_S)
        logs = api.logs(created["Id"]).decode(errors="replace")
    finally:
        api.remove_container(created["Id"], force=True)
    readings = dict(line.split("=", 1) for line in logs.splitlines() if "=" in line)
    return readings, list(created.get("Warnings") or [])


def limit_checks(engine: Engine) -> list[Check]:
    if not engine.has_base:
        return [
            Check("limits", False, f"not probed: {BASE_IMAGE} is missing", "run `orsbox build`")
        ]
    try:
        readings, warnings = probe(engine.client, BASE_IMAGE)
    except Exception as e:
        return [Check("limits", False, f"the probe container failed: {e}", "see docker's message")]
    checks = [
        _limit(
            "memory limit",
            readings.get("memory"),
            str(PROBE_MEMORY_BYTES),
            "memory",
            "cgroup_enable=memory",
        ),
        _limit("swap limit (memory + swap)", readings.get("swap"), None, "memory", "swapaccount=1"),
        _limit("pids limit", readings.get("pids"), str(PROBE_PIDS), "pids", "cgroup_enable=pids"),
        _limit("cpu limit", readings.get("cpus"), PROBE_CPU_QUOTA, "cpu", "CONFIG_CFS_BANDWIDTH"),
    ]
    network = (readings.get("network") or "").split()
    checks.append(
        Check(
            "no network",
            network == ["lo"],
            f"interfaces: {' '.join(network) or 'none'}",
            "docker must support network_mode=none",
        )
    )
    init_ok = readings.get("init") in INITS
    checks.append(
        Check(
            "init process",
            init_ok,
            f"PID 1 is {readings.get('init')}",
            "install tini / docker-init (Debian: apt-get install tini) and restart dockerd",
        )
    )
    checks += [Check("docker warning", False, w, "see the warning") for w in warnings]
    return checks


ISOLATION_PROBE = "echo kernel=$(uname -r); echo boot=$(dmesg 2>/dev/null | head -1)"
RUNTIME_ALIASES = ("io.containerd.",)  # the engine's internal names for runc


def runtime_checks(engine: Engine) -> list[Check]:
    """Each runtime the engine offers, started with a probe that reads the kernel it
    sees: the host's (namespaces and cgroups only, like runc) or one of its own (gVisor
    says 4.4.0 and boots in dmesg). The configured runtime must be among them."""
    from orsbox.settings import Settings

    wanted = getattr(Settings().backend, "runtime", None)
    if engine.description.startswith("Podman"):
        return [podman_runtime_check(wanted)]
    client = engine.client
    runtimes = [
        name
        for name in (client.info().get("Runtimes") or {})
        if not name.startswith(RUNTIME_ALIASES)
    ]
    checks = [Check("runtimes", True, ", ".join(runtimes))]
    if wanted and wanted not in runtimes:
        fix = "register it in daemon.json `runtimes` (see docs/gvisor.md) and kill -HUP dockerd"
        checks.append(Check(f"runtime {wanted}", False, "configured but not offered", fix))
    if not engine.has_base:
        return checks
    for name in runtimes:
        checks.append(_isolation(client, name))
    return checks


def podman_runtime_check(wanted: str | None) -> Check:
    """Podman's Docker-compatible API (4.3) ignores the runtime a container asks for and
    runs its default OCI runtime (measured: `--runtime kata`, not installed, still ran);
    a configured runtime (gVisor's) would silently not apply."""
    detail = "Podman runs every container under its default OCI runtime (runc/crun)"
    if wanted is None:
        return Check("runtimes", True, detail)
    fix = "use a Docker engine for another runtime (docs/gvisor.md), or drop `runtime`"
    return Check(f"runtime {wanted}", False, f"configured, but ignored: {detail}", fix)


def _isolation(client: Any, runtime: str) -> Check:
    api = client.api
    host_config = api.create_host_config(network_mode="none", runtime=runtime, init=True)
    try:
        created = api.create_container(
            BASE_IMAGE,
            ["bash", "-c", ISOLATION_PROBE],
            host_config=host_config,
            labels={"orsbox.doctor": "1"},
        )
    except Exception as e:
        return Check(f"runtime {runtime}", False, f"cannot create a container: {e}")
    try:
        api.start(created["Id"])
        api.wait(created["Id"], timeout=PROBE_TIMEOUT_S)
        logs = api.logs(created["Id"]).decode(errors="replace")
    except Exception as e:
        fix = "for runsc: runtimeArgs --network=none and --platform=systrap (docs/gvisor.md)"
        return Check(f"runtime {runtime}", False, f"the probe did not run: {e}", fix)
    finally:
        api.remove_container(created["Id"], force=True)
    readings = dict(line.split("=", 1) for line in logs.splitlines() if "=" in line)
    kernel = readings.get("kernel", "?")
    if kernel == os.uname().release:
        detail = f"shares the host's kernel {kernel} (namespaces and cgroups)"
    else:
        boot = readings.get("boot", "").split("]", 1)[-1].strip()
        detail = f"its own kernel: {kernel} ({boot or 'no dmesg'}), not the host's"
    return Check(f"runtime {runtime}", True, detail)


def _limit(name: str, seen: str | None, expected: str | None, what: str, kernel: str) -> Check:
    # swap: any finite number means memory + swap is bounded
    ok = bool(seen and seen.isdigit()) if expected is None else seen == expected
    detail = (
        f"enforced ({seen})"
        if ok
        else f"not enforced (read {seen!r}, wanted {expected or 'a bound'})"
    )
    return Check(name, ok, detail, CGROUP_FIX.format(what=what, kernel=kernel))


def doctor() -> None:
    """Check that this machine can run orsbox sandboxes.

    The Docker engine answers, the images exist, memory, pids, cpu and network
    limits are enforced (a tiny container reads its own cgroup), and each runtime the
    engine offers starts and shows whether it isolates the kernel (runsc: gVisor's). The
    egress guard's rules can be put in place (and what they block), and squid is there
    for allow-lists. Prints a fix for each failure; exit code 1 when anything failed."""
    check, engine = engine_check()
    checks = [check]
    report(check)
    from orsbox.cli.doctor_network import network_checks

    found = [*image_checks(), *limit_checks(engine), *runtime_checks(engine)] if engine else []
    for check in [*found, *network_checks()]:
        report(check)
        checks.append(check)
    failed = [c for c in checks if not c.ok]
    out.print(
        f"\n{len(checks) - len(failed)} ok, {len(failed)} failed" if failed else "\nAll good."
    )
    if failed:
        raise typer.Exit(1)
