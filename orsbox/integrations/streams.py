"""A command's stdout and stderr apart, over a sandbox that interleaves them.

orsbox's sandboxes return one output stream in the order it was written (what an agent
should read). Harnesses (Inspect, Harbor) want the two apart, so a command runs under a
small `/bin/sh` wrapper, launched by absolute path so that an image's PATH cannot swap
it, which sends the command's stderr to a file and prints it after a random marker once
the command ends: one round trip carries both streams. `printf` is a builtin of sh;
`cat` and `rm` are named by absolute path.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from orsbox.integrations.handles import SandboxHandle

# $1 the stderr file, $2 the marker; then the command (not exec'ed: the shell waits).
STDERR_WRAPPER = (
    'err=$1 mark=$2; shift 2; "$@" 2>"$err"; rc=$?; '
    'printf "%s" "$mark"; /bin/cat -- "$err"; /bin/rm -f -- "$err"; exit $rc'
)


@dataclass(frozen=True)
class SplitOutcome:
    stdout: str
    stderr: str
    exit_code: int | None  # None: timed out
    timed_out: bool
    truncated: bool


async def run_split(
    handle: SandboxHandle,
    argv: list[str],
    *,
    stdin: bytes | None = None,
    cwd: str = "",
    env: dict[str, str] | None = None,
    user: str | None = None,
    timeout_s: float | None = None,
    cap_bytes: int,
) -> SplitOutcome:
    """Run `argv` and return its streams apart; `cap_bytes` bounds both together."""
    marker = f"\n--orsbox-stderr-{secrets.token_hex(16)}--\n"
    errfile = f"/tmp/.orsbox-stderr-{secrets.token_hex(8)}"
    outcome = await handle.run(
        ["/bin/sh", "-c", STDERR_WRAPPER, "sh", errfile, marker, *argv],
        stdin=stdin,
        cwd=cwd,
        env=env or {},
        user=user,
        timeout_s=timeout_s,
        cap_bytes=cap_bytes + len(marker),
    )
    stdout, _, stderr = outcome.data.partition(marker.encode())
    return SplitOutcome(
        stdout=stdout.decode(errors="replace"),
        stderr=stderr.decode(errors="replace"),
        exit_code=outcome.exit_code,
        timed_out=outcome.timed_out,
        truncated=outcome.truncated,
    )
