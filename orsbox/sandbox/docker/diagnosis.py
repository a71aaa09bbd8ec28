"""What `orsbox doctor` asks a Docker engine: does it enforce the limits orsbox sets
(memory, pids, cpus, no network, an init process), proven by a tiny real container
reading its own cgroup, not by trusting `docker info`; and which runtimes it offers,
each started with a probe that reads the kernel it sees. Answers are `EngineCheck`s,
plain data the CLI prints (`SandboxBackend.engine_checks`)."""

from __future__ import annotations

import os
import re
from typing import Any

from orsbox.sandbox.diagnosis import EngineCheck as Check
from orsbox.sandbox.images import BASE_IMAGE

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


def engine_checks(client: Any, description: str, has_base: bool, wanted: str | None) -> list[Check]:
    """The limit checks, then the runtime checks, of the engine behind `client`
    (blocking: run it in a thread)."""
    return [
        release_check(description),
        *limit_checks(client, has_base),
        *runtime_checks(client, description, has_base, wanted),
    ]


# Docker releases before 20.10.27 (and the 21/22 lines: 23.0 has it) lack the fix for
# libnetwork's deadlock between its watch loop and endpoint deletion (moby/moby#42545,
# fixed by moby/moby#46693): removing hundreds of containers at once can hang every
# later removal and `docker info` until dockerd restarts. Seen here once, removing a
# ramp's 1,000 episodes on Debian 12's docker.io 20.10.24 (docs/operating/sizing.md).
DEADLOCK_FIXED = ((20, 10, 27), (23, 0, 0))


def release_check(description: str) -> Check:
    """The engine's release against known bugs orsbox's load meets: a warning, not a
    failure (see `EngineCheck.warning`); Podman and unparsed releases pass unnamed."""
    found = re.match(r"Docker (\d+)\.(\d+)\.(\d+)", description)
    if found is None:
        return Check("engine release", True, description.split(" at ")[0])
    release = tuple(int(part) for part in found.groups())
    fixed = release >= DEADLOCK_FIXED[1] or DEADLOCK_FIXED[0] <= release < (20, 11, 0)
    if fixed:
        return Check("engine release", True, found[0])
    return Check(
        "engine release",
        True,
        f"{found[0]} can deadlock removing many containers at once (libnetwork, "
        "moby/moby#42545): removals and `docker info` hang until dockerd restarts",
        "where hundreds of episodes come and go, run Docker 20.10.27 or later "
        "(Docker's own apt repository: docker-ce)",
        warning=True,
    )


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


def limit_checks(client: Any, has_base: bool) -> list[Check]:
    if not has_base:
        return [
            Check("limits", False, f"not probed: {BASE_IMAGE} is missing", "run `orsbox build`")
        ]
    try:
        readings, warnings = probe(client, BASE_IMAGE)
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


def runtime_checks(
    client: Any, description: str, has_base: bool, wanted: str | None
) -> list[Check]:
    """Each runtime the engine offers, started with a probe that reads the kernel it
    sees: the host's (namespaces and cgroups only, like runc) or one of its own (gVisor
    says 4.4.0 and boots in dmesg). The configured runtime must be among them."""
    if description.startswith("Podman"):
        return [podman_runtime_check(wanted)]
    runtimes = [
        name
        for name in (client.info().get("Runtimes") or {})
        if not name.startswith(RUNTIME_ALIASES)
    ]
    checks = [Check("runtimes", True, ", ".join(runtimes))]
    if wanted and wanted not in runtimes:
        fix = "register it in daemon.json `runtimes` (see docs/gvisor.md) and kill -HUP dockerd"
        checks.append(Check(f"runtime {wanted}", False, "configured but not offered", fix))
    if not has_base:
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
