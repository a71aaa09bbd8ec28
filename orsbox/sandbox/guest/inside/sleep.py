"""The guest's sleep: idle long enough (the hello's `sleep_after`, seconds), with
nothing of the sandbox's running but its shell, the guest replaces itself (`exec`, same
pid) by a `bash` that waits for one byte on stdin and then runs the guest again, which
takes up the shell where it was.

Why: an idle sandbox's guest is a python interpreter, 3.4 MiB of private memory for as
long as the sandbox lives, where a waiting bash is 0.3 MiB (measured, python 3.11 and
bash 5.2). At a thousand live episodes most are idle while the model thinks.

How it stays correct:
  - the host starts every request with one newline (`channel.WAKE`): bash's
    `read -r -n 1` takes exactly that byte (bash reads a pipe a byte at a time; `-n`
    is in every bash since 2.04, where `-N` would need 4.1 and an older bash would
    wake at once, a python start every period), the request's frame stays in the
    pipe for the guest that wakes, and an awake guest skips the newline
    (`wire.FrameBuffer`). A request that arrives while the guest is going to sleep is
    safe too: its newline is still first in the pipe;
  - only when nothing would miss the guest: no call running or queued, no memory watch
    (gVisor's: it must keep polling), no process the sandbox started other than the
    shell (a background job's output would fill the shell's pipe, unread), no output
    held between calls, no partial frame read;
  - the shell's descriptors are inherited through both execs; its state (which
    descriptor is which, its token) goes in a memfd, not on the command line;
  - the guest that wakes loads the payload's kept copy (`keep.py`) and checks its
    SHA-256 (the host's, from the hello), as a sub-guest does; the copy is in a sticky
    tmpfs folder, so another user cannot replace it;
  - stdin's end (the host gone) wakes it too, and the guest that wakes finds the end
    and stops the sandbox, as it would have awake.
"""

import os
import select

from .json_codec import dumps, loads
from .keep import keep
from .processes import process_table
from .quiet import suppress

HOLDER = 'IFS= read -r -n 1 _; exec "$0" "$@"'  # bash: one byte, then the guest again
WAKE_FLAG = "--wake"


def others_running(guest):
    """Whether the sandbox runs anything the guest would leave unwatched: what its user
    started (`Guest.started_here`) other than the shell."""
    table = process_table()
    shell = guest.shell.proc.pid if guest.shell.proc is not None else None
    return any(pid != shell for pid in guest.started_here(table)(table))


def may_sleep(guest):
    shell = guest.shell
    return (
        guest.memory.watch is None
        and not guest.execs
        and not guest.shell_queue
        and not guest.frames.data
        and shell.call is None
        and (shell.proc is None or shell.idle())
        and not others_running(guest)
    )


def sleep(guest):
    """Exec the holder if the guest may sleep; returns (staying awake) if not, or if
    the exec fails."""
    if not hasattr(os, "memfd_create"):  # python < 3.8: the guest stays awake
        return
    if not may_sleep(guest) or not readable_stdin_empty():
        return
    kept = guest.kept or keep(guest.payload)
    if kept is None or guest.payload_digest is None:
        return
    guest.kept = kept
    state = {
        "shell": guest.shell.export() if guest.shell.proc is not None else None,
        "address_space": guest.memory.address_space,
        "sleep_after": guest.sleep_after,
        "kept": kept,
        "digest": guest.payload_digest,
    }
    state_fd = os.memfd_create("orsbox-guest-state", 0)
    os.write(state_fd, dumps(state).encode())
    inherited = [0, 1, 2, state_fd, *guest.shell.descriptors()]
    for fd in inherited:
        os.set_inheritable(fd, True)
    os.set_blocking(0, True)
    python = command_line()
    argv = ["bash", "--noprofile", "--norc", "-c", HOLDER, *python]
    argv += ["--kept", kept, guest.payload_digest, WAKE_FLAG, str(state_fd)]
    try:
        os.execvp("bash", argv)
    except OSError:  # no bash after all: stay awake, and do not try again
        os.set_blocking(0, False)
        for fd in inherited[3:]:
            os.set_inheritable(fd, False)
        os.close(state_fd)
        guest.sleep_after = None


def readable_stdin_empty():
    """No byte of a request is waiting: the holder's one byte must be a request's first."""
    poller = select.poll()
    poller.register(0, select.POLLIN)
    return not poller.poll(0)


def command_line():
    """This guest's interpreter and loader, from its own command line, up to the
    loader's arguments (`python3 -I -S -c LOADER`)."""
    with open("/proc/self/cmdline", "rb") as f:
        parts = f.read().split(b"\0")
    loader_at = parts.index(b"-c") + 1
    return [os.fsdecode(part) for part in parts[: loader_at + 1]]


def woken_state(argv):
    """The state `sleep` left, if this guest was woken (`--wake FD`), else None."""
    if WAKE_FLAG not in argv:
        return None
    fd = int(argv[argv.index(WAKE_FLAG) + 1])
    data = b""
    while True:
        chunk = os.pread(fd, 65536, len(data))
        if not chunk:
            break
        data += chunk
    with suppress(OSError):
        os.close(fd)
    return loads(data.decode())
