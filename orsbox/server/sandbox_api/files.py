"""Files in and out of an API sandbox in bounded chunks, byte-exact.

The `openreward` client moves files over `/stat_file`, `/read_file` (offset, length)
and `/write_file` (a chunk at an offset, then a commit that checks the size, computes
the sha256 and renames the file into place, so the target is never seen half-written).
Each operation is one short Python program run with `Sandbox.exec` (every orsbox
sandbox image has python3: its guest runs on it), so a transfer holds one chunk in
memory and works through any backend. A program reports a refusal on its output with
an exit status naming the HTTP status; nothing it says is trusted beyond that.
"""

from __future__ import annotations

import json

from orsbox.errors import BadRequest, NotFound, OrsboxError, RangeNotSatisfiable, SandboxError
from orsbox.sandbox.base import Sandbox

FILE_TIMEOUT_S = 900.0  # hashing a multi-GB file on commit
HEADER_ROOM_BYTES = 4096


# Every program: argv[1] is the path. Exit 10 -> 400, 11 -> 404, 12 -> 416.
_COMMON = """
import hashlib, json, os, stat, sys
def fail(code, msg):
    sys.stdout.write(msg); sys.stdout.flush(); os._exit(code)
def regular(path):
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        fail(11, "no such file: " + path)
    except OSError as e:
        fail(10, "cannot read " + path + ": " + e.strerror)
    if stat.S_ISLNK(st.st_mode):
        fail(10, path + " is a symlink; give the path it points to")
    if not stat.S_ISREG(st.st_mode):
        fail(10, path + " is not a regular file")
    return st
def digest(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()
def part(path):
    return os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".orsbox-part")
path = sys.argv[1]
"""

STAT = (
    _COMMON
    + """
st = regular(path)
out = {"size": st.st_size}
if sys.argv[2] == "1":
    out["sha256"] = digest(path)
sys.stdout.write(json.dumps(out))
"""
)

READ = (
    _COMMON
    + """
st = regular(path)
offset, length = int(sys.argv[2]), int(sys.argv[3])
if offset > st.st_size or (offset == st.st_size and length > 0):
    fail(12, "offset %d is past the end of %s (%d bytes)" % (offset, path, st.st_size))
with open(path, "rb") as f:
    f.seek(offset)
    data = f.read(length)
sys.stdout.buffer.write(b"%d\\n" % st.st_size + data)
"""
)

WRITE = (
    _COMMON
    + """
offset, mkdirs = int(sys.argv[2]), sys.argv[3] == "1"
if offset == 0 and mkdirs:
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
try:
    f = open(part(path), "wb" if offset == 0 else "r+b")
except FileNotFoundError:
    fail(10, "cannot write " + path + ": its folder is missing, or no chunk at offset 0 came first")
except OSError as e:
    fail(10, "cannot write " + path + ": " + e.strerror)
with f:
    f.seek(offset)
    f.write(sys.stdin.buffer.read())
"""
)

COMMIT = (
    _COMMON
    + """
size = int(sys.argv[2])
try:
    st = os.stat(part(path))
except FileNotFoundError:
    fail(10, "nothing was written to " + path + " to commit")
if st.st_size != size:
    fail(10, "%s has %d bytes written, not the %d the commit names" % (path, st.st_size, size))
sha = digest(part(path))
try:
    os.replace(part(path), path)
except OSError as e:
    fail(10, "cannot commit " + path + ": " + e.strerror)
sys.stdout.write(json.dumps({"sha256": sha}))
"""
)

_ERRORS: dict[int, type[OrsboxError]] = {10: BadRequest, 11: NotFound, 12: RangeNotSatisfiable}


async def _run(
    sandbox: Sandbox, program: str, args: list[str], *, stdin: bytes = b"", cap: int = 65536
) -> bytes:
    argv = ["python3", "-I", "-S", "-c", program, *args]
    result = await sandbox.exec(
        argv, timeout_s=FILE_TIMEOUT_S, output_cap_bytes=cap, stdin=stdin or None
    )
    if result.exit_code == 0 and not result.truncated:
        return result.data
    error = _ERRORS.get(result.exit_code or -1)
    if error is not None:
        raise error(result.data.decode("utf-8", "replace")[:1000])
    detail = result.output[-500:] if result.output else "no output"
    raise SandboxError(f"file operation failed (exit {result.exit_code}): {detail}")


async def stat_file(sandbox: Sandbox, path: str, sha256: bool) -> dict[str, object]:
    return json.loads(await _run(sandbox, STAT, [path, "1" if sha256 else "0"]))


async def read_chunk(sandbox: Sandbox, path: str, offset: int, length: int) -> tuple[int, bytes]:
    """(the file's size, up to `length` bytes from `offset`)."""
    if offset < 0 or length < 0:
        raise BadRequest("offset and length must not be negative")
    out = await _run(
        sandbox, READ, [path, str(offset), str(length)], cap=length + HEADER_ROOM_BYTES
    )
    size, _, data = out.partition(b"\n")
    return int(size), data


async def write_chunk(sandbox: Sandbox, path: str, offset: int, data: bytes, mkdirs: bool) -> None:
    if offset < 0:
        raise BadRequest("offset must not be negative")
    await _run(sandbox, WRITE, [path, str(offset), "1" if mkdirs else "0"], stdin=data)


async def commit(sandbox: Sandbox, path: str, size: int) -> str:
    return json.loads(await _run(sandbox, COMMIT, [path, str(size)]))["sha256"]
