"""`orsbox doctor`: can this machine run orsbox sandboxes, and what to do when it cannot.

Every check comes from the selected backend (ORSBOX_BACKEND), each answer with a fix:
what runs the sandboxes answers (`BackendConfig.title`, `SandboxBackend.describe`; the
Docker engine); the images the bundled environments need exist; the backend's own
checks (`engine_checks`; Docker: the limits orsbox sets are enforced, proven by a tiny
real container reading its own cgroup, and the runtimes it offers); and its network
checks (`network_checks`; Docker: the egress guard's rules, put in place and read back,
and squid for allow-listed networks). Between them, a table of the host's limits that
live episodes use up (`host_limits`; docs/operating/sizing.md) and whether the next
thousand fit, naming the limit that stops them first.
"""

from __future__ import annotations

import os

import typer
from rich.console import Console
from rich.table import Table

from orsbox.errors import SandboxError
from orsbox.sandbox.base import SandboxBackend
from orsbox.sandbox.diagnosis import EngineCheck
from orsbox.sandbox.host_limits import GOAL_EPISODES, HostLimit, first_to_stop

out = Console(highlight=False)

Check = EngineCheck  # one answer with its fix


def report(check: Check) -> None:
    if not check.ok:
        mark = "[red]FAIL[/red]"
    else:
        mark = "[yellow]warn[/yellow]" if check.warning else "[green]ok  [/green]"
    out.print(f"{mark} {check.name}: {check.detail}")
    if (check.warning or not check.ok) and check.fix:
        out.print(f"     [bold]fix:[/bold] {check.fix}")


def summary(checks: list[Check]) -> str:
    """The last line: counts of what failed and what holds with a warning."""
    failed = sum(not c.ok for c in checks)
    warned = sum(c.ok and c.warning for c in checks)
    notes = f", {warned} warning{'s' * (warned != 1)}" if warned else ""
    if failed:
        return f"{len(checks) - failed} ok, {failed} failed{notes}"
    return f"All good{notes}."


def engine_check() -> tuple[Check, list[Check] | None, list[HostLimit]]:
    """The configured backend: who answers, its own checks (limits enforced, runtimes
    offered) and the host's limits its episodes use up; None and [] when nothing
    answers."""
    from orsbox.sandbox.config import with_backend
    from orsbox.settings import Settings

    config = Settings().backend
    try:
        description, checks, limits = with_backend(config, _describe)
    except Exception as e:
        return config.unreachable(e), None, []
    return Check(config.title, True, description), checks, limits


async def _describe(backend: SandboxBackend) -> tuple[str, list[Check], list[HostLimit]]:
    return await backend.describe(), await backend.engine_checks(), await backend.host_limits()


def network_checks() -> list[Check]:
    """The backend's checks of the guard it gives networked sandboxes, under a doctor
    id whatever it puts in place (removed before it answers)."""
    from orsbox.sandbox.config import with_backend
    from orsbox.server.policy import allows_allowlist
    from orsbox.settings import Settings

    settings = Settings()

    async def ask(backend: SandboxBackend) -> list[Check]:
        return await backend.network_checks(allowlists=allows_allowlist(settings))

    try:
        return with_backend(settings.backend, ask, server_id=f"doctor-{os.getpid()}")
    except SandboxError:  # a backend that cannot be made: engine_check said why
        return []


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


def print_limits(limits: list[HostLimit]) -> None:
    """The table of host limits: each one's value, use, cost per episode and the
    episodes it leaves room for, least room first (* : networked episodes only)."""
    table = Table("limit", "value", "in use", "per episode", "more episodes", box=None)
    for limit in sorted(limits, key=lambda lim: (lim.headroom is None, lim.headroom or 0)):
        table.add_row(
            limit.name + (" *" if limit.networked_only else ""),
            "unlimited" if limit.limit is None else str(limit.limit),
            str(limit.in_use),
            f"{limit.per_episode:g}",
            "-" if limit.headroom is None else str(limit.headroom),
        )
    out.print("host limits that live episodes use (* networked ones only):")
    out.print(table)


def limits_check(limits: list[HostLimit], goal: int) -> Check:
    """Whether `goal` more live episodes fit under every limit, and which one stops
    them first (networked episodes: which stops those)."""
    name = f"room for {goal} more episodes"
    first, networked = first_to_stop(limits), first_to_stop(limits, networked=True)
    if first is None or first.headroom is None:
        return Check(name, True, "no limit binds them")
    detail = f"{first.name} stops them first, at {first.headroom} more"
    if networked is not None and networked.headroom is not None:
        detail += f" (networked: {networked.name} at {networked.headroom})"
        if networked.headroom < goal <= first.headroom:
            return Check(name, False, detail, networked.raise_with)
    return Check(name, first.headroom >= goal, detail, first.raise_with)


def doctor(
    episodes: int = typer.Option(
        GOAL_EPISODES, help="How many more live episodes the host's limits must allow."
    ),
) -> None:
    """Check that this machine can run orsbox sandboxes.

    The Docker engine answers, the images exist, memory, pids, cpu and network
    limits are enforced (a tiny container reads its own cgroup), and each runtime the
    engine offers starts and shows whether it isolates the kernel (runsc: gVisor's). The
    egress guard's rules can be put in place (and what they block), and squid is there
    for allow-lists. The host's limits (open files, tasks, inotify, conntrack, the
    engine's own) leave room for `episodes` more live episodes, or the one that stops
    them first is named with its setting. The engine's release is checked against known
    bugs orsbox's load meets (a warning). Prints a fix for each failure and warning;
    exit code 1 when anything failed."""
    check, engine_checks, limits = engine_check()
    checks = [check]
    report(check)
    found = [*image_checks(), *engine_checks] if engine_checks is not None else []
    for check in found:
        report(check)
    if limits:
        print_limits(limits)
        found.append(limits_check(limits, episodes))
        report(found[-1])
    for check in network_checks():
        report(check)
        found.append(check)
    checks += found
    out.print(f"\n{summary(checks)}")
    if not all(c.ok for c in checks):
        raise typer.Exit(1)
