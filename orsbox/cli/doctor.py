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

import typer
from rich.console import Console

from orsbox.sandbox.base import SandboxBackend
from orsbox.sandbox.config import DEFAULT_ENGINE
from orsbox.sandbox.diagnosis import EngineCheck

out = Console(highlight=False)

Check = EngineCheck  # one answer with its fix; the network checks' too


def report(check: Check) -> None:
    mark = "[green]ok  [/green]" if check.ok else "[red]FAIL[/red]"
    out.print(f"{mark} {check.name}: {check.detail}")
    if not check.ok and check.fix:
        out.print(f"     [bold]fix:[/bold] {check.fix}")


def engine_check() -> tuple[Check, list[Check] | None]:
    """The configured backend's engine: who answers, and its own checks (limits enforced,
    runtimes offered), or None when nothing answers."""
    from orsbox.sandbox.config import with_backend
    from orsbox.settings import Settings

    config = Settings().backend
    where = getattr(config, "engine", None) or os.environ.get("DOCKER_HOST") or DEFAULT_ENGINE
    try:
        description, checks = with_backend(config, _describe)
    except Exception as e:
        fix = "start one with `bash scripts/start-docker.sh` (it installs docker.io if needed)"
        if os.environ.get("DOCKER_HOST"):
            fix += f", or unset DOCKER_HOST / point it at a running engine (it is {where})"
        return Check("Docker engine", False, f"no Docker engine answers at {where}: {e}", fix), None
    return Check("Docker engine", True, description), checks


async def _describe(backend: SandboxBackend) -> tuple[str, list[Check]]:
    return await backend.describe(), await backend.engine_checks()


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


def doctor() -> None:
    """Check that this machine can run orsbox sandboxes.

    The Docker engine answers, the images exist, memory, pids, cpu and network
    limits are enforced (a tiny container reads its own cgroup), and each runtime the
    engine offers starts and shows whether it isolates the kernel (runsc: gVisor's). The
    egress guard's rules can be put in place (and what they block), and squid is there
    for allow-lists. Prints a fix for each failure; exit code 1 when anything failed."""
    check, engine_checks = engine_check()
    checks = [check]
    report(check)
    from orsbox.cli.doctor_network import network_checks

    found = [*image_checks(), *engine_checks] if engine_checks is not None else []
    for check in [*found, *network_checks()]:
        report(check)
        checks.append(check)
    failed = [c for c in checks if not c.ok]
    out.print(
        f"\n{len(checks) - len(failed)} ok, {len(failed)} failed" if failed else "\nAll good."
    )
    if failed:
        raise typer.Exit(1)
