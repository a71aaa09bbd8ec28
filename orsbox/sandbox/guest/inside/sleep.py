"""The guest's sleep: idle long enough (the hello's `sleep_after`, seconds), with
nothing of the sandbox's running but its shell, the guest replaces itself (`exec`, same
pid) by a sleeper until a request comes that the sleeper hands back, then runs the
guest again, which takes up the shell where it was.

Why: an idle sandbox's guest is a python interpreter, 3.4 MiB of private memory for as
long as the sandbox lives. At a thousand live episodes most are idle while the model
thinks.

The sleeper is native when the host sent one (the hello's payload, built on the host:
`orsbox/sandbox/guest/sleeper/sleeper.c`), else a bash. The native sleeper (84 KiB
resident, its binary included) answers plain shell calls itself, in the same shell, so
a call to a sleeping sandbox costs 0.25 ms of CPU, not a python start of 10-17 ms: a
hundred sandboxes called at once after the model's turn are answered in milliseconds,
not a second (BENCHMARKS.md). Whatever else comes (another request, a call past its
deadline or its cap, a job left running, the end of stdin) it hands to the python guest
it execs, with what it has read (`handed_off`, `Guest.take_over`): the rules of a call
stay here, in one place. The bash (0.3 MiB of its own) waits for one byte and runs the
guest again, which then reads the request.

How it stays correct:
  - the host starts every request with one newline (`channel.WAKE`): the sleeper takes
    exactly that byte (bash's `read -r -n 1`: bash reads a pipe a byte at a time; `-n`
    is in every bash since 2.04, where `-N` would need 4.1 and an older bash would
    wake at once, a python start every period), the request's frame stays in the
    pipe for the guest that wakes, or is handed to it, and an awake guest skips the
    newline (`wire.FrameBuffer`). A request that arrives while the guest is going to
    sleep is safe too: its newline is still first in the pipe;
  - only when nothing would miss the guest: no call running or queued, no memory watch
    (gVisor's: it must keep polling), no process the sandbox started other than the
    shell (a background job's output would fill the shell's pipe, unread), no output
    held between calls, no partial frame read; the native sleeper wakes the guest when
    a call it ran leaves a process running, by the same rule (`Guest.started_here`);
  - the shell's descriptors are inherited through the execs; its state (which
    descriptor is which, its token) goes in a memfd, not on the command line;
  - the guest that wakes loads the payload's kept copy (`keep.py`) and checks its
    SHA-256 (the host's, from the hello), as a sub-guest does; the copy is in a sticky
    tmpfs folder, so another user cannot replace it; the native sleeper is kept in a
    sealed memfd, which no one can change;
  - stdin's end (the host gone) wakes it too, and the guest that wakes finds the end
    and stops the sandbox, as it would have awake.
"""

import os
import select

from .json_codec import dumps, loads
from .keep import keep
from .processes import process_table
from .quiet import suppress
from .wire import write_all

HOLDER = 'IFS= read -r -n 1 _; exec "$0" "$@"'  # bash: one byte, then the guest again
WAKE_FLAG = "--wake"
HANDOFF_FLAG = "--handoff"
SLEEPER_NAME = "orsbox-guest-sleeping"  # the native sleeper's argv[0], as `ps` shows it


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
    """Exec the sleeper (native if the host sent one, else the bash holder) if the guest
    may sleep; returns (staying awake) if not, or if every exec fails."""
    if not hasattr(os, "memfd_create"):  # python < 3.8: the guest stays awake
        return
    if not may_sleep(guest) or not readable_stdin_empty():
        return
    kept = guest.kept or keep(guest.payload)
    if kept is None or guest.payload_digest is None:
        return
    guest.kept = kept
    sleeper = native_sleeper(guest)
    shell = guest.shell.export() if guest.shell.proc is not None else None
    state = {
        "shell": shell,
        "address_space": guest.memory.address_space,
        "sleep_after": guest.sleep_after,
        "kept": kept,
        "digest": guest.payload_digest,
        "sleeper": sleeper,
    }
    state_fd = os.memfd_create("orsbox-guest-state", 0)
    os.write(state_fd, dumps(state).encode())
    inherited = [0, 1, 2, state_fd, *guest.shell.descriptors()]
    if sleeper is not None:
        inherited.append(sleeper)
    for fd in inherited:
        os.set_inheritable(fd, True)
    os.set_blocking(0, True)
    python = [*command_line(), "--kept", kept, guest.payload_digest, WAKE_FLAG, str(state_fd)]
    if sleeper is not None and shell is not None:
        with suppress(OSError):  # (another architecture's, a kernel that refuses it...)
            os.execve(sleeper, [*sleeper_argv(guest, shell), "--", *python], os.environ)
    try:
        os.execvp("bash", ["bash", "--noprofile", "--norc", "-c", HOLDER, *python])
    except OSError:  # no bash after all: stay awake, and do not try again
        os.set_blocking(0, False)
        for fd in inherited[3:]:
            os.set_inheritable(fd, False)
        os.close(state_fd)
        guest.sleep_after = None


def native_sleeper(guest):
    """A descriptor of the native sleeper (`sleeper.c`, the hello's payload), made at
    the first sleep and kept through every sleep and wake after; None if the host sent
    none. Sealed: a command of the sandbox's user that opens it (/proc/PID/fd) cannot
    change what the guest runs next."""
    if guest.sleeper_fd is None and guest.sleeper:
        import fcntl  # only here: it costs the awake guest nothing before its first sleep

        fd = os.memfd_create("orsbox-guest-sleeper", os.MFD_ALLOW_SEALING)
        try:
            write_all(fd, guest.sleeper)
            seals = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE
            fcntl.fcntl(fd, fcntl.F_ADD_SEALS, seals)
            guest.sleeper_fd = fd
        except (OSError, AttributeError):  # (a kernel, or a python build, without seals)
            os.close(fd)
        guest.sleeper = None
    return guest.sleeper_fd


def sleeper_argv(guest, shell):
    """The native sleeper's arguments before `--` (its own comment lists them), for the
    shell as `Shell.export` describes it."""
    children = -1 if shell["children"] is None else shell["children"]
    oom = guest.memory.oom.path or ""
    return [SLEEPER_NAME, str(shell["pid"]), str(shell["stdin"]), str(shell["out"]),
            str(shell["script"]), str(children), shell["token"], oom,
            guest.shell.line.decode(), guest.shell.eval.decode()]  # fmt: skip


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
    return loads(read_and_close(int(argv[argv.index(WAKE_FLAG) + 1])).decode())


def handed_off(argv):
    """What the native sleeper handed over (`--handoff FD`, `sleeper.c`): (its shell
    call or None, the stdin bytes it read and did not answer, the call's output so far,
    the shell's children when the call began), or None if it handed nothing."""
    if HANDOFF_FLAG not in argv:
        return None
    data = read_and_close(int(argv[argv.index(HANDOFF_FLAG) + 1]))
    line_end = data.index(b"\n") + 1
    head = loads(data[: line_end - 1].decode())
    at = line_end + head["input"]
    requests = data[line_end:at]
    output = data[at : at + head["output"]]
    jobs = data[at + head["output"] : at + head["output"] + head["jobs"]].decode()
    return head["call"], requests, output, jobs


def read_and_close(fd):
    """All of a memfd the guest that slept, or its sleeper, wrote."""
    data = b""
    while True:
        chunk = os.pread(fd, 65536, len(data))
        if not chunk:
            break
        data += chunk
    with suppress(OSError):
        os.close(fd)
    return data
