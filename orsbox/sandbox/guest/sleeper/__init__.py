"""The native sleeper (`sleeper.c`): what a sleeping guest becomes, sent in each
sandbox's hello when guests may sleep.

Why native: a sleeping python guest had to start python again for every call, 10-17 ms
of CPU; a hundred sandboxes called at once after the model's turn took a second on two
cores (BENCHMARKS.md, "Sleeping guests"). The sleeper answers plain shell calls itself
and hands the rest to the python guest (`inside/sleep.py`).

Where the server gets it, first found first (`sleeper_binary`):

1. shipped: built when orsbox's wheel was (`setup.py`, where the build had `musl-gcc`;
   the server image's wheel is built so), kept beside this file as `orsbox-sleeper`
   with `orsbox-sleeper.sha256`, the digest of the source and flags it was built from.
   Used only if that digest is this `sleeper.c`'s (a binary of an older source is
   stale), it is static, and it runs here (its usage error, in a memfd);
2. built once per server process with a C compiler that links statically against musl
   (`musl-gcc`, Debian's `musl-tools`), in a temporary folder removed at once;
3. none: a guest sleeps as a waiting bash, as before: slower to wake, the same answers.

ORSBOX_SLEEPER_CC names the compiler instead (for example `zig cc -target
aarch64-linux-musl` for another architecture's engine: then nothing shipped is used), or
`none`: no sleeper at all. In an image of another architecture than the binary's (its
exec fails), a guest sleeps as bash too.
"""

from __future__ import annotations

import functools
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
from pathlib import Path
from typing import Literal

SOURCE = Path(__file__).with_name("sleeper.c")
SHIPPED = SOURCE.parent  # where the wheel's build puts it (setup.py)
SHIPPED_NAME = "orsbox-sleeper"
DIGEST_NAME = "orsbox-sleeper.sha256"
CC_VARIABLE = "ORSBOX_SLEEPER_CC"
FLAGS = ["-static", "-Os", "-s", "-Wall", "-Wextra", "-Werror"]
BUILD_TIMEOUT_S = 60.0
CHECK_TIMEOUT_S = 10.0
USAGE_STATUS = 2  # sleeper.c's exit status, and message, when its arguments are wrong
USAGE_MESSAGE = b"the sleeper's arguments are wrong"
PT_INTERP = 3  # a program header asking for a dynamic loader

log = logging.getLogger(__name__)


def compiler() -> list[str] | None:
    """The command that builds the sleeper, or None if this host has none."""
    configured = os.environ.get(CC_VARIABLE, "").strip()
    if configured:
        return shlex.split(configured)
    found = shutil.which("musl-gcc")
    return [found] if found else None


def source_digest(source: Path = SOURCE) -> str:
    """What a binary is built from, as the digest shipped beside it: the flags and
    `sleeper.c`."""
    digest = hashlib.sha256(" ".join(FLAGS).encode() + b"\n")
    digest.update(source.read_bytes())
    return digest.hexdigest()


@functools.cache
def sleeper_binary() -> bytes | None:
    """The sleeper's executable (static, about 60 KB): the shipped one, else one built
    now; None if neither (no compiler, or the build failed: logged once)."""
    configured = os.environ.get(CC_VARIABLE, "").strip()
    if configured == "none":
        return None
    if not configured:
        shipped = shipped_binary()
        if shipped is not None:
            log.debug("the native sleeper: the one shipped with orsbox")
            return shipped
    cc = compiler()
    if cc is None:
        log.info("no musl C compiler (musl-gcc, or %s): sleeping guests wait as bash", CC_VARIABLE)
        return None
    return build(cc)


def build(cc: list[str]) -> bytes | None:
    """The sleeper compiled by `cc`, or None if that failed (logged)."""
    with tempfile.TemporaryDirectory(prefix="orsbox-sleeper-") as folder:
        out = Path(folder) / SHIPPED_NAME
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


def ship(folder: Path) -> bool:
    """Build the sleeper into `folder` (a package's `sleeper/` being built: setup.py),
    beside the digest of its source; False, and neither file there, without a compiler
    or if the build failed."""
    for name in (SHIPPED_NAME, DIGEST_NAME):
        (folder / name).unlink(missing_ok=True)  # an older build's is stale
    cc = compiler()
    binary = build(cc) if cc is not None and cc != ["none"] else None
    if binary is None:
        return False
    (folder / SHIPPED_NAME).write_bytes(binary)
    (folder / SHIPPED_NAME).chmod(0o755)
    (folder / DIGEST_NAME).write_text(source_digest() + "\n")
    return True


def shipped_binary(folder: Path | None = None) -> bytes | None:
    """The sleeper shipped in `folder` (SHIPPED), if it is this source's build and runs
    here; else None (why, logged, if one is there)."""
    folder = SHIPPED if folder is None else folder
    try:
        binary = (folder / SHIPPED_NAME).read_bytes()
        digest = (folder / DIGEST_NAME).read_text().strip()
    except FileNotFoundError:
        return None
    except OSError as e:
        log.warning("the shipped native sleeper could not be read: %s", e)
        return None
    why: str | None = "it was built from another sleeper.c than this orsbox's (stale)"
    if digest == source_digest():
        why = unusable(binary)
    if why is not None:
        log.warning("the shipped native sleeper is not used: %s", why)
        return None
    return binary


def unusable(binary: bytes) -> str | None:
    """Why this executable cannot be the sleeper here, or None: it must be static (it
    runs in any image) and run on this machine (it ends with its usage error)."""
    if not is_static(binary):
        return "it is not a static executable"
    try:
        fd = executable_memfd(binary)
    except OSError as e:
        return f"it could not be run ({e})"
    try:
        done = subprocess.run(
            [f"/proc/self/fd/{fd}"], pass_fds=(fd,), capture_output=True, timeout=CHECK_TIMEOUT_S
        )
    except (OSError, subprocess.SubprocessError) as e:
        return f"it does not run here ({e})"
    finally:
        os.close(fd)
    if done.returncode != USAGE_STATUS or USAGE_MESSAGE not in done.stderr:
        return f"it does not run here (status {done.returncode})"
    return None


def executable_memfd(binary: bytes) -> int:
    """A read-only descriptor of `binary` in memory (no file system's noexec applies),
    with no writable one left open: an exec of a file open for writing may fail with
    ETXTBSY."""
    writable = os.memfd_create("orsbox-sleeper-check")
    try:
        view = memoryview(binary)
        while view:
            view = view[os.write(writable, view) :]
        return os.open(f"/proc/self/fd/{writable}", os.O_RDONLY | os.O_CLOEXEC)
    finally:
        os.close(writable)


def is_static(elf: bytes) -> bool:
    """Whether an ELF executable asks for no dynamic loader (no PT_INTERP header)."""
    if elf[:4] != b"\x7fELF" or elf[4] not in (1, 2) or elf[5] not in (1, 2):
        return False
    wide = elf[4] == 2
    order: Literal["little", "big"] = "little" if elf[5] == 1 else "big"
    offset_at, size_at = (0x20, 0x36) if wide else (0x1C, 0x2A)
    offset = int.from_bytes(elf[offset_at : offset_at + (8 if wide else 4)], order)
    size = int.from_bytes(elf[size_at : size_at + 2], order)
    count = int.from_bytes(elf[size_at + 2 : size_at + 4], order)
    if count == 0 or offset + count * size > len(elf):
        return False
    types = [int.from_bytes(elf[offset + i * size :][:4], order) for i in range(count)]
    return PT_INTERP not in types
