"""The native sleeper (`sleeper.c`): what a sleeping guest becomes, built on the host
and sent in each sandbox's hello when guests may sleep.

Why native: a sleeping python guest had to start python again for every call, 10-17 ms
of CPU; a hundred sandboxes called at once after the model's turn took a second on two
cores (BENCHMARKS.md, "Sleeping guests"). The sleeper answers plain shell calls itself
and hands the rest to the python guest (`inside/sleep.py`).

Built once per server process with a C compiler that links statically against musl
(`musl-gcc`, Debian's `musl-tools`; or the command in ORSBOX_SLEEPER_CC, for example
`zig cc -target x86_64-linux-musl`; `none` sends no sleeper), in a temporary folder
removed at once. Without a compiler, or in an image of another architecture (its exec
fails), a guest sleeps as a waiting bash, as before: slower to wake, the same answers.
"""

from __future__ import annotations

import functools
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path

SOURCE = Path(__file__).with_name("sleeper.c")
CC_VARIABLE = "ORSBOX_SLEEPER_CC"
FLAGS = ["-static", "-Os", "-s", "-Wall", "-Wextra", "-Werror"]
BUILD_TIMEOUT_S = 60.0

log = logging.getLogger(__name__)


def compiler() -> list[str] | None:
    """The command that builds the sleeper, or None if this host has none."""
    configured = os.environ.get(CC_VARIABLE, "").strip()
    if configured:
        return shlex.split(configured)
    found = shutil.which("musl-gcc")
    return [found] if found else None


@functools.cache
def sleeper_binary() -> bytes | None:
    """The sleeper's executable (static, about 60 KB), or None: no compiler, or the
    build failed (logged once)."""
    cc = compiler()
    if cc == ["none"]:
        return None
    if cc is None:
        log.info("no musl C compiler (musl-gcc, or %s): sleeping guests wait as bash", CC_VARIABLE)
        return None
    with tempfile.TemporaryDirectory(prefix="orsbox-sleeper-") as folder:
        out = Path(folder) / "orsbox-sleeper"
        try:
            subprocess.run(
                [*cc, *FLAGS, "-o", str(out), str(SOURCE)],
                check=True,
                capture_output=True,
                timeout=BUILD_TIMEOUT_S,
            )
        except (OSError, subprocess.SubprocessError) as e:
            detail = getattr(e, "stderr", b"") or b""
            log.warning(
                "the native sleeper did not build (%s) %s", e, detail.decode(errors="replace")
            )
            return None
        return out.read_bytes()
