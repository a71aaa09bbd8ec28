"""How the guest gets into a sandbox: a short loader as `python3 -c`, the guest's payload
(`payload.py`) on stdin, or for a sub-guest the copy the main guest keeps.

The image needs no file of ours, and `ps` in the sandbox shows a short command line
rather than the guest's source. The main guest is the sandbox's own command (under
`init`), so a sandbox costs no extra process start (Docker: no `docker exec`); it reads
the payload from stdin, before any guest frame. A sub-guest (`exec(user=...)`) is the
same loader started as that user (Docker: `docker exec`). Given `--kept PATH DIGEST` it
reads the main guest's copy at PATH (`inside/keep.py`) and runs it only if its SHA-256
is DIGEST: the copy is where the sandbox's user can write, the sub-guest may be root
(SHA-256 from the interpreter's built-in module, `_sha256` or `_sha2`: `hashlib` and
OpenSSL cost 3-12 ms to import in a container, the built-in 0.05 ms). A
copy missing or changed ends the loader with a message on stderr, and the host starts
the sub-guest again with the payload sent (`start.SubGuests`).

A python whose bytecode is not the host's compiles the source in a forked child, which
sends the code back marshalled: the compiler's freed memory stays in the compiling
process (1.3 MiB of python's arenas, in python 3.11), and the guest lives as long as its
sandbox; with the child it keeps what the compiled payload would cost (0.6 MiB).

The loader runs the package's modules in the payload's order, each as a module of the
package `orsbox_guest` (so their relative imports find each other in `sys.modules`),
then calls the entry's `main(argv, payload)`. Python 3.7 and later: no syntax newer
than that here or in the package.

`-I` ignores the image's `PYTHON*` variables (a `PYTHONPATH` must not shadow a module
the guest imports); `-S` skips `site`, which the guest, using only the standard
library, does not need and which costs a few milliseconds per start.
"""

from __future__ import annotations

from dataclasses import dataclass

from orsbox.sandbox.guest.payload import GUEST_NAME

LOADER = f"""import os, sys, marshal
a = sys.argv
def r(n):
    b = b''
    while len(b) < n:
        c = os.read(0, n - len(b))
        if not c:
            raise SystemExit(1)
        b += c
    return b
if '--kept' in a:
    try:
        from _sha256 import sha256
    except ImportError:
        try:
            from _sha2 import sha256
        except ImportError:
            from hashlib import sha256
    p, h = a[a.index('--kept') + 1:][:2]
    try:
        with open(p, 'rb') as f:
            b = f.read()
    except OSError:
        b = b''
    if sha256(b).hexdigest() != h:
        raise SystemExit('{GUEST_NAME}: the kept guest ' + p + ' is missing or changed')
else:
    b = r(20)
    b += r(int(b[:10]) + int(b[10:]))
n = 20 + int(b[:10])
try:
    from _frozen_importlib_external import MAGIC_NUMBER
    e, c = marshal.loads(b[24:n]) if b[20:24] == MAGIC_NUMBER else (0, 0)
except Exception:
    c = 0
if not c:
    p, w = os.pipe()
    if not os.fork():
        e, c = marshal.loads(b[n:])
        with os.fdopen(w, 'wb') as f:
            marshal.dump((e, [(k, i, compile(s, '{GUEST_NAME}/' + k, 'exec')) for k, i, s in c]), f)
        os._exit(0)
    os.close(w)
    with os.fdopen(p, 'rb') as f:
        e, c = marshal.load(f)
    os.wait()
for k, i, x in c:
    m = type(sys)(k)
    q, _, t = k.rpartition('.')
    m.__package__ = k if i else q
    if i:
        m.__path__ = []
    sys.modules[k] = m
    if q:
        setattr(sys.modules[q], t, m)
    exec(x, m.__dict__)
sys.modules[e].main(a[1:], b)"""


@dataclass(frozen=True)
class Kept:
    """Where the main guest keeps the payload's copy, and the digest it must have."""

    path: str
    digest: str


def guest_argv(sub: bool = False, kept: Kept | None = None, python: str = "python3") -> list[str]:
    """The command that starts a guest: the sandbox's own (`sub=False`, the guest whose
    stdin EOF ends the sandbox) or a sub-guest as another user, which with `kept`
    loads the main guest's copy instead of reading the payload. `python`: a sub-guest's
    is the main guest's own (its real path), not what PATH finds once the agent ran."""
    argv = [python, "-I", "-S", "-c", LOADER]
    if sub:
        argv.append("--sub")
    if kept is not None:
        argv += ["--kept", kept.path, kept.digest]
    return argv
