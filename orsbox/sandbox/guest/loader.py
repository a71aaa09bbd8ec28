"""How the guest gets into a sandbox: a short loader as `python3 -c`, the guest on stdin.

The image needs no file of ours, and `ps` in the sandbox shows a short command line
rather than 30 KB of guest source. The main guest is the container's own command (under
`init`), so a sandbox costs no `docker exec` to start; a sub-guest (`exec(user=...)`) is
the same loader started by `docker exec`.

What the host sends first, before any guest frame: two 10-digit lengths, then the guest
compiled by the host's python (marshal, behind its 4-byte magic number), then the guest's
source. A container whose python has the same magic number runs the compiled code and
skips compiling 1000 lines, a good part of a cold start; any other python compiles the
source. The magic number changes with every change of the bytecode format, so equal
magic means the code object loads as compiled.

`-I` ignores the image's `PYTHON*` variables (a `PYTHONPATH` must not shadow a module
the guest imports); `-S` skips `site`, which the guest, using only the standard
library, does not need and which costs a few milliseconds per start.
"""

from __future__ import annotations

import functools
import importlib.util
import marshal
from pathlib import Path

GUEST_NAME = "orsbox-guest"  # the code's file name in tracebacks; `ps` shows it too

LOADER = f"""import os
def r(n):
    b = b''
    while len(b) < n:
        c = os.read(0, n - len(b))
        if not c:
            raise SystemExit(1)
        b += c
    return b
n, m = int(r(10)), int(r(10))
c, s = r(n), r(m)
try:
    import marshal
    from _frozen_importlib_external import MAGIC_NUMBER
    c = marshal.loads(c[4:]) if c[:4] == MAGIC_NUMBER else None
except Exception:
    c = None
exec(c or compile(s, '{GUEST_NAME}', 'exec'))"""


def guest_argv(sub: bool = False) -> list[str]:
    """The command that starts a guest: the container's own (`sub=False`, the guest
    whose stdin EOF ends the container) or a `docker exec` one as another user."""
    return ["python3", "-I", "-S", "-c", LOADER, *(["--sub"] if sub else [])]


@functools.cache
@functools.cache
def guest_payload() -> bytes:
    """What the loader reads from stdin (see the module docstring). Made once: it
    compiles the guest, tens of milliseconds of the event loop per sandbox started."""
    source = (Path(__file__).parent / "script.py").read_bytes()
    code = importlib.util.MAGIC_NUMBER + marshal.dumps(compile(source, GUEST_NAME, "exec"))
    return b"%010d%010d" % (len(code), len(source)) + code + source
