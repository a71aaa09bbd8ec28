"""The in-container guest: one process per sandbox that runs every command for the host.

Started as the container's own command, `python3 -c <loader>`, the loader reading this
guest from stdin (so the image needs python3 >= 3.7 and bash, no copied files; see
`loader.py`); the host attaches to the container's stdin and stdout before starting it.
It turns a 54 ms `docker exec` per call into a sub-millisecond round trip on a socket
that stays open. A sub-guest (`--sub`, to run as another user) is the same loader
started by `docker exec`.
Standard library only; single-threaded on purpose: a fork bomb that exhausts the pids
limit must not stop the guest from sweeping it (a thread is a pid too). One long module
on purpose too: it travels as one source text.

Wire format, both directions (host -> guest on stdin, guest -> host on stdout; stdout
carries nothing else, diagnostics go to stderr):

    >II  header length, payload length | header: JSON object | payload: raw bytes

Requests carry an integer `id` and an `op`: hello (with `"shell": true`, the persistent
shell is started just after the reply), shell, restart, killall, exec, read,
write, untar. Each gets exactly one reply with the same `id`: `{"ok": true, ...}` or
`{"ok": false, "error": "...", "kind": "file" | "bad"}`. Command output, file contents,
stdin and written data travel as the payload, never as JSON text, so binary data and
50 MB files cost no escaping.

The guest sends nothing until the host's `hello`: bytes that arrived while the host's
HTTP client was still reading docker's upgrade response could be lost.

Dead-man's switch: EOF on stdin means the server died or let go of the sandbox; the
guest then ends the container, whose command it is (`Guest.stop`), and `auto_remove`
deletes it.
"""

import collections
import contextlib
import errno
import io
import json
import math
import os
import resource
import select
import selectors
import signal
import stat
import struct
import subprocess
import sys
import time

HEAD = struct.Struct(">II")
READ_CHUNK = 65536
POLL_S = 0.05  # how often running children are polled for exit while work is active
SHELL_GRACE_S = 0.5  # after a timeout sweep, how long the shell gets to print its sentinel
SWEEP_LIMIT_S = 3.0  # a kill sweep repeats until quiet, but not for longer than this
STOP_WAIT_S = 0.5  # how long a sweep waits for the shell to show as stopped
DEATH_WAIT_S = 1.0  # how long a timed-out call's reply waits for its killed processes to die
REPLY_DUE_S = 0.5  # after a shell call's timeout, its reply goes out by then, sweep done or not
KILLS_PER_HOLD = (
    8  # a long kill pass stops the held group again (and replies if due) after this many
)
STATUS_MAX = 3  # digits in the sentinel's exit status ($? is 0-255)
CLK_TCK = os.sysconf("SC_CLK_TCK")
STOPPED_OR_DEAD = (b"T", b"t", b"Z", b"X")  # /proc/PID/stat states
OOM_FILES = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")


def log(message):
    sys.stderr.write(f"orsbox-guest: {message}\n")
    sys.stderr.flush()


# ---------------------------------------------------------------------------- output cap


class Capture:
    """Bounded output: the first half of the cap, the last half, and a byte count.

    Memory never exceeds the cap, however much a command prints."""

    def __init__(self, cap):
        self.cap = max(int(cap), 2)
        self.head_cap = self.cap // 2
        self.tail_cap = self.cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def add(self, data):
        self.total += len(data)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += data[:room]
            data = data[room:]
        if not data:
            return
        if len(data) >= self.tail_cap:
            self.tail = bytearray(data[len(data) - self.tail_cap :])
            return
        self.tail += data
        excess = len(self.tail) - self.tail_cap
        if excess > 0:
            del self.tail[:excess]

    def result(self):
        """(bytes, truncated)"""
        cut = self.total - len(self.head) - len(self.tail)
        if cut <= 0:
            return bytes(self.head + self.tail), False
        marker = (
            f"\n[... {cut} bytes cut: the output was {self.total} bytes,"
            f" over the {self.cap}-byte cap ...]\n"
        )
        return bytes(self.head) + marker.encode() + bytes(self.tail), True


# ---------------------------------------------------------------------------- processes


def now_tick():
    """Clock ticks since boot, the unit of /proc/PID/stat's start time."""
    if hasattr(time, "CLOCK_BOOTTIME"):
        return int(time.clock_gettime(time.CLOCK_BOOTTIME) * CLK_TCK)
    with open("/proc/uptime") as f:
        return int(float(f.read().split()[0]) * CLK_TCK)


def stat_fields(pid):
    """/proc/PID/stat after the command name (state first), or None if there is no
    such process. The name is skipped by its last ")": it may hold spaces and ")"."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2 :].split()


RUNNING_LISTED = 100  # command lines a killall reply lists at most
COMMAND_LINE_CHARS = 400


def command_line(pid):
    """The process's command line as one string (arguments joined by spaces, cut to
    COMMAND_LINE_CHARS), "[name]" for one without arguments, None if it is gone."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            raw = f.read(COMMAND_LINE_CHARS * 4)
        if not raw:
            with open(f"/proc/{pid}/comm", "rb") as f:
                raw = b"[" + f.read().strip() + b"]"
    except OSError:
        return None
    return raw.rstrip(b"\0").replace(b"\0", b" ").decode("utf-8", "replace")[:COMMAND_LINE_CHARS]


def process_table(hold=None):
    """{pid: (ppid, sid, start_tick, state, pgrp)} for every process in the container.
    With `hold`, it is called every KILLS_PER_HOLD processes read (`kill_pass`)."""
    table = {}
    for count, name in enumerate(os.listdir("/proc"), 1):
        if hold is not None and count % KILLS_PER_HOLD == 0:
            hold()
        rest = stat_fields(name) if name.isdigit() else None  # (no := : python 3.7)
        if rest is not None:
            table[int(name)] = (int(rest[1]), int(rest[3]), int(rest[19]), rest[0], int(rest[2]))
    return table


def ancestry_root(pid, table, roots):
    """The first of `roots` found walking up from pid (pid itself included), else the
    pid whose parent is 0 or 1 (an orphan's last ancestor)."""
    seen = 0
    while pid in table and seen < 4096:
        if pid in roots:
            return pid
        ppid = table[pid][0]
        if ppid in (0, 1):
            return pid
        pid, seen = ppid, seen + 1
    return pid


def process_state(pid):
    """(state, start_tick) of a process, or None if there is no such process."""
    rest = stat_fields(pid)
    return None if rest is None else (rest[0], int(rest[19]))


def kill_sweep(select_victims, killed=None, hold=None):
    """Kill what `select_victims(table)` names, including what it starts while being
    killed (a fork bomb). Returns how many were new; `killed` collects (pid, start
    tick) of each, so a caller that sweeps again does not count a process that is still
    dying as a new one.

    Kill passes repeat until two come up empty; then the sweep waits for the killed to
    die and looks once more, since a dead process has no fork in flight. Linux cancels a
    fork whose parent has a SIGKILL pending, so there that look finds nothing; gVisor
    does not. SIGKILL, not SIGSTOP, first: gVisor sends SIGHUP to a process group with
    a stopped member whenever one of its processes exits (Linux only when the group
    becomes orphaned), and the shell's earlier background jobs are in that group.

    Processes still appearing after the first pass are a fork loop or a bomb: those are
    stopped (`freeze`) before more are killed. A stopped process forks no more and, unlike
    a dead one, still counts against the pids limit, so the rest of a bomb, retrying
    its failed forks, finds no room to grow back. Killing alone made that room: under
    gVisor, where a pass over /proc is slow next to a bomb, one outgrew the sweep one
    time in three.

    `hold`, when given, is called before every look at the process table: the shell's
    sweep passes one that stops the shell's whole process group with a single system
    call. Under gVisor every system call of this guest is a round trip through the
    Sentry, which a bomb's hundreds of runnable processes (and the sandbox's CPU quota
    they exhaust) slow to tens of milliseconds: a pass over /proc took 1-8 s and the
    sweep lost the race for 30 s and more. Stopped, the bomb uses no CPU and forks no
    more, so the passes run at their normal speed."""
    killed = set() if killed is None else killed
    before, quiet, frozen = len(killed), 0, False
    deadline = time.time() + SWEEP_LIMIT_S
    dying = kill_pass(select_victims, killed, hold)
    while True:  # at least one more pass, even past the deadline: the frozen must die
        fresh = kill_pass(select_victims, killed, hold)
        if fresh and not frozen:
            frozen = True
            fresh |= kill_frozen(select_victims, killed, deadline, hold)
        dying |= fresh
        quiet = 0 if fresh else quiet + 1
        if time.time() >= deadline:
            break
        if quiet < 2:
            continue
        if not dying:
            break
        wait_dead(dying, deadline)
        dying, quiet = set(), 1  # the pass after the deaths must come up empty too
    return len(killed) - before


def kill_frozen(select_victims, killed, deadline, hold):
    """Stop the victims (`freeze`), then kill the stopped; returns those killed."""
    stopped = freeze(select_victims, killed, deadline, hold)
    return kill_pass(lambda table: same_processes(stopped, table), killed, hold)


def freeze(select_victims, killed, deadline, hold):
    """SIGSTOP the victims, pass after pass, until every one shows as stopped (or dead,
    or refused the signal); returns the (pid, start tick) of each it stopped. A process
    shows as stopped only on its way back to user space, so a fork it was making has
    finished by then and its child is in the next pass's table."""
    refused, stopped = set(), set()
    while time.time() < deadline:
        table = look(hold)
        running = [
            key
            for key in live_victims(select_victims, table, killed)
            if table[key[0]][3] not in STOPPED_OR_DEAD and key not in refused
        ]
        if not running:
            break
        for key in running:
            try:
                os.kill(key[0], signal.SIGSTOP)
                stopped.add(key)
            except OSError:
                refused.add(key)  # gone, or another user's: the kill passes see to it
    return stopped


def same_processes(keys, table):
    """The pids of `keys` ((pid, start tick)) that are still those processes."""
    return [pid for pid, tick in keys if pid in table and table[pid][2] == tick]


def live_victims(select_victims, table, killed):
    """The victims in `table`, as (pid, start tick), that are neither zombies nor in
    `killed` already."""
    out = set()
    for pid in select_victims(table):
        entry = table.get(pid)
        if entry is not None and entry[3] != b"Z" and (pid, entry[2]) not in killed:
            out.add((pid, entry[2]))
    return out


def look(hold):
    """The process table, after `hold()` when given (the sweep's one system call that
    stops a whole process group) and while reading it: a process of the group that was
    in the middle of a fork when it was stopped may have a child that was not; under
    gVisor, where a bomb's running processes made one read of /proc last 14 s, those
    children forked on meanwhile."""
    if hold is not None:
        hold()
    return process_table(hold)


def kill_pass(select_victims, killed, hold=None):
    """One look at the process table: SIGKILL the victims not already in `killed`, add
    them to it, and return them as (pid, start tick). With `hold`, it is called again
    every KILLS_PER_HOLD kills (and reads, `look`): under gVisor each kill of a bomb's
    process costs milliseconds (the killed die meanwhile), and `hold` is also where the
    shell's sweep sends a reply that is due (`Shell.hold_and_reply`)."""
    fresh = live_victims(select_victims, look(hold), killed)
    killed |= fresh
    for count, (pid, _) in enumerate(fresh, 1):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)
        if hold is not None and count % KILLS_PER_HOLD == 0:
            hold()
    return fresh


def wait_stopped(pid):
    """Until `pid`, sent SIGSTOP, shows as stopped (or dead), for at most STOP_WAIT_S.
    A process stops only on its way back to user space: a fork() it was in the middle
    of has finished, and its child is in /proc, once it shows as stopped."""
    deadline = time.time() + STOP_WAIT_S
    while True:
        state = process_state(pid)
        if state is None or state[0] in STOPPED_OR_DEAD or time.time() >= deadline:
            return
        time.sleep(0.0002)


def wait_dead(killed, deadline=None):
    """Until every killed (pid, start tick) is gone or a zombie, for at most DEATH_WAIT_S
    (or until `deadline`): a reply that says the processes were killed must not reach a
    caller who then still sees them (under load a SIGKILLed process can take a while to
    get the CPU it needs to die)."""
    pending = set(killed)
    deadline = min(deadline or math.inf, time.time() + DEATH_WAIT_S)
    while pending:
        for key in list(pending):
            state = process_state(key[0])
            if state is None or state[0] in (b"Z", b"X") or state[1] != key[1]:
                pending.discard(key)
        if not pending or time.time() >= deadline:
            return
        time.sleep(0.001)


class OomCounter:
    """The cgroup's count of OOM kills (v1 memory.oom_control, v2 memory.events),
    read with one pread on a descriptor kept open: it is read twice per command."""

    def __init__(self):
        self.fd = None
        for path in OOM_FILES:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            self.fd = fd
            if self.read() is not None:
                return
            os.close(fd)
            self.fd = None

    def read(self):
        if self.fd is None:
            return None
        try:
            text = os.pread(self.fd, 4096, 0).decode()
        except OSError:
            return None
        for line in text.splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
        return None


OOM = None  # the guest's OomCounter, made in main()


class MemoryWatch:
    """Under gVisor, an OOM killer inside: when the memory in use inside passes `bound` bytes
    while commands run, kill the largest process a command started.

    gVisor has none of its own: processes that each stay under RLIMIT_AS but together
    pass the sandbox's memory make the host kill gVisor's Sentry, so the whole sandbox
    ends. gVisor's /proc/meminfo counts the sandbox's memory (MemTotal - MemAvailable;
    MemTotal is the host's bound, which the host sets above `bound` so that what is
    allocated between two looks fits), read with one pread per loop turn on a
    descriptor kept open. Kills count as OOM kills in the call's reply."""

    def __init__(self, bound):
        self.bound = bound
        self.kills = 0
        self.fd = os.open("/proc/meminfo", os.O_RDONLY)

    def used(self):
        try:
            text = os.pread(self.fd, 4096, 0)
        except OSError:
            return None
        fields = {}
        for line in text.splitlines():
            key, _, value = line.partition(b":")
            if key in (b"MemTotal", b"MemAvailable"):
                fields[key] = int(value.split()[0]) * 1024
        if len(fields) < 2:
            return None
        return fields[b"MemTotal"] - fields[b"MemAvailable"]

    def check(self, victims):
        """Kill the largest of `victims(table)`, as many as hold the excess, if the
        memory in use inside is past the bound; returns a note naming each."""
        used = self.used()
        if used is None or used <= self.bound:
            return []
        table = process_table()
        sizes = sorted(((resident_bytes(pid), pid) for pid in victims(table)), reverse=True)
        notes, over, killed = [], used - self.bound, set()
        for size, pid in sizes:  # the largest first, until what they hold covers the excess
            if over <= 0 or not size:
                break
            name = command_line(pid) or "?"
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            killed.add((pid, table[pid][2]))
            self.kills += 1
            over -= size
            notes.append(
                f"[orsbox: out of memory: killed process {pid} ({name[:80]}, {size >> 20} MiB),"
                f" the largest, as the sandbox's processes used {used >> 20} MiB"
                f" of {self.bound >> 20}]"
            )
        wait_dead(killed)  # their memory is free before the next look
        return notes


def resident_bytes(pid):
    """A process's resident memory (/proc/PID/statm), 0 if it is gone."""
    try:
        with open(f"/proc/{pid}/statm", "rb") as f:
            return int(f.read().split()[1]) * PAGE_SIZE
    except (OSError, IndexError, ValueError):
        return 0


PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
MEMORY_WATCH = None  # the guest's MemoryWatch, when the hello asks for one


def command_script():
    """A memfd for the shell's commands (python >= 3.8 on Linux, a kernel with memfd and
    /dev/fd), or None: then a pipe carries them."""
    try:
        fd = os.memfd_create("orsbox-command", 0)
    except (AttributeError, OSError):
        return None
    if not os.path.exists(f"/dev/fd/{fd}"):
        os.close(fd)
        return None
    return fd


def open_children_file(pid):
    try:
        return os.open(f"/proc/{pid}/task/{pid}/children", os.O_RDONLY)
    except OSError:
        return None


def read_children(fd):
    """Direct children of a process: the shell's background jobs from earlier calls,
    which a timeout must spare even if they started within the same clock tick."""
    if fd is None:
        return set()
    try:
        return set(int(p) for p in os.pread(fd, 65536, 0).split())
    except (OSError, ValueError):
        return set()


def oom_count():
    """OOM kills so far: the cgroup's, and the guest's own (`MemoryWatch`)."""
    counted = OOM.read() if OOM is not None else None
    if MEMORY_WATCH is None:
        return counted
    return (counted or 0) + MEMORY_WATCH.kills


def raise_oom_score():
    """Make this process, not the guest or PID 1, the OOM victim."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


ADDRESS_SPACE = None  # the hello's "address_space": each command's RLIMIT_AS, if any


def bound_address_space():
    """Cap this process's address space (RLIMIT_AS) at the hello's `address_space`.

    The host asks for it under gVisor, which has no OOM killer inside: one process
    allocating past the sandbox's memory would end the whole sandbox (the host kills
    gVisor's Sentry). Bounded, its allocation fails inside (ENOMEM: a MemoryError,
    malloc returning NULL) and the sandbox lives on. gVisor enforces RLIMIT_AS on every
    mapping; its RLIMIT_DATA covers only brk, so large mallocs (mmap) pass it."""
    if ADDRESS_SPACE is None:
        return
    with contextlib.suppress(OSError, ValueError):
        resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE, ADDRESS_SPACE))


def set_address_space(limit):
    global ADDRESS_SPACE
    ADDRESS_SPACE = int(limit) if limit else None


def watch_memory(bound):
    global MEMORY_WATCH
    if bound and MEMORY_WATCH is None:
        with contextlib.suppress(OSError):
            MEMORY_WATCH = MemoryWatch(int(bound))


def prepare_child():
    """Run in each child before exec."""
    raise_oom_score()
    bound_address_space()


def prepare_shell():
    """Run in the persistent shell before exec: its own process group, in the guest's
    session (not a session of its own). So its group is never an orphan while the shell
    lives (the shell's parent is in the same session, another group), and a timeout
    sweep's `killpg(SIGSTOP)` holds. gVisor sends SIGHUP and SIGCONT to an orphaned
    group with a stopped member whenever one of its processes exits (Linux only when it
    becomes orphaned): in a group of its own session, every exit of a stopped fork
    bomb's process continued the whole bomb again, and the sweep's passes ran against a
    bomb that kept forking (1-8 s for a pass)."""
    os.setpgid(0, 0)
    prepare_child()


def read_ready(fd):
    """One read of a non-blocking descriptor the selector named: bytes, b"" at EOF (or
    on an error, which ends the stream the same way), None if it had nothing after all.
    At most READ_CHUNK: os.read allocates the full size it is asked for."""
    try:
        return os.read(fd, READ_CHUNK)
    except OSError as e:
        return None if e.errno == errno.EAGAIN else b""


def timeout_note(call):
    killed = len(call.killed)
    return f"[orsbox: timed out after {call.timeout:g}s; killed {killed} process(es) it started]"


def exit_code_of(returncode):
    return 128 - returncode if returncode < 0 else returncode


# ---------------------------------------------------------------------------- persistent shell


class ShellCall:
    def __init__(self, rid, capture, timeout, notes):
        self.rid = rid
        self.capture = capture
        self.timeout = timeout
        self.started = time.time()
        self.deadline = self.started + timeout
        self.start_tick = now_tick()
        self.oom_before = oom_count()
        self.timed_out = False
        self.grace = 0.0  # once timed out: when the shell is killed if still not back
        self.next_sweep = 0.0
        self.killed = set()  # (pid, start tick) of each process a timeout sweep killed
        self.notes = notes
        self.replied = False  # answered before its sweep was done (`Shell.hold_and_reply`)
        self.earlier_jobs = set()  # type: set[int]  # the shell's children when it began


class Shell:
    """A persistent `bash --noprofile --norc` whose state survives between calls.

    Per call the guest writes the command, quoted, into a memfd and one short fixed line
    to bash's stdin: bash sources the memfd, which `eval`s the command at top level (not
    inside a function, where `declare` would be local), then prints a NUL-framed
    sentinel with a per-shell random token and `$?`. (Without memfd the command goes
    through a second pipe, read with `read -d ''`.) No fork per call. stdout and stderr
    share one pipe so output interleaves as on a terminal; the pipe is drained at all
    times, also between calls (background jobs), into bounded captures."""

    def __init__(self, guest):
        self.guest = guest
        self.proc = None  # type: subprocess.Popen[bytes] | None
        self.call = None  # type: ShellCall | None
        self.out_open = False
        self.between = Capture(65536)

    # -- life

    def start(self):
        self.token = os.urandom(8).hex()
        self.sentinel = b"\0" + self.token.encode() + b":"
        out_r, out_w = os.pipe()
        self.script = command_script()
        if self.script is not None:
            cmd_r = self.cmd_w = self.script
        else:
            cmd_r, self.cmd_w = os.pipe()
        self.proc = subprocess.Popen(
            ["bash", "--noprofile", "--norc"],
            stdin=subprocess.PIPE,
            stdout=out_w,
            stderr=out_w,
            env=dict(os.environ, **{SHELL_MARK_NAME: "1"}),
            pass_fds=(cmd_r,),
            preexec_fn=prepare_shell,
        )
        os.close(out_w)
        if self.script is None:
            os.close(cmd_r)
        self.out_r, self.out_open, self.pending = out_r, True, b""
        os.set_blocking(out_r, False)
        self.guest.sel.register(out_r, selectors.EVENT_READ, self.on_output)
        # bash reads a pipe (its stdin) one byte at a time, a system call per byte,
        # which costs tens of microseconds under gVisor: the per-call line is short and
        # the command comes from a memfd bash sources (read in one go). The eval stays
        # at top level (inside a function `declare` would be local); the sentinel is
        # printed after the source, so a `return` in the command cannot skip it.
        printer = f"__orsbox_p() {{ printf '\\000{self.token}:%d\\000' \"$1\"; }}"
        # gVisor sends SIGHUP to an orphaned process group when one of its processes
        # exits while another is stopped (docs/gvisor.md); the shell's group is not
        # orphaned while the shell lives (`prepare_shell`), but once the shell is
        # killed it is, with the sweep's stopped. A no-op handler keeps a
        # shell, and its state, alive; what it starts still gets the
        # default action (a caught signal resets on exec). The handler is a blank,
        # not `:`: a command may redefine `:` (the classic fork bomb does), and the
        # trap would then restart the bomb at the next HUP, after the sweep.
        printer += "; trap ' ' HUP"
        if self.script is not None:
            os.write(self.stdin_pipe().fileno(), (printer + "\n").encode())
            self.line = f". /dev/fd/{cmd_r};__orsbox_p $?\n".encode()
            self.eval = f'eval "$__orsbox_c" </dev/null {cmd_r}<&-\n'.encode()
        else:  # no memfd (python < 3.8): the command through a pipe, read to its NUL
            reader = f"__orsbox_r() {{ IFS= read -r -d '' __orsbox_c <&{cmd_r}; }}"
            os.write(self.stdin_pipe().fileno(), f"{reader}; {printer}\n".encode())
            line = f'__orsbox_r;eval "$__orsbox_c" </dev/null {cmd_r}<&-;__orsbox_p $?\n'
            self.line = line.encode()
        self.children = open_children_file(self.proc.pid)

    def forget(self):
        """Close our ends of a shell that is dead (or about to be)."""
        self.close_output()
        os.close(self.cmd_w)
        if self.children is not None:
            os.close(self.children)
        with contextlib.suppress(OSError):
            self.stdin_pipe().close()
        self.proc = None

    def running(self):
        # type: () -> subprocess.Popen[bytes]
        """The shell's process, there from `start` to `forget`."""
        assert self.proc is not None, "no shell"
        return self.proc

    def stdin_pipe(self):
        """bash's stdin (a pipe: `start`)."""
        stdin = self.running().stdin
        assert stdin is not None, "bash's stdin is a pipe"
        return stdin

    def close_output(self):
        if self.out_open:
            self.guest.sel.unregister(self.out_r)
            os.close(self.out_r)
            self.out_open = False

    def kill(self, call=None):
        """Kill bash and everything it started: its descendants, its process group, and
        what left both (a double fork that called setsid is neither in the group nor, once
        its parent is gone, a descendant): `escaped_from_shell` finds those by the mark
        in their environment and, given the running `call`, `timeout_victims` by when
        they started."""
        proc = self.running()
        pid = proc.pid
        hold = None  # its group stopped before each pass, as in `sweep` (all of it dies)
        if proc.returncode is None:  # a reaped pid could be someone else's
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)  # first: a dead shell starts nothing more
            hold = self.hold_group  # (the shell stays unreaped until the sweeps are done)
        if call is not None:  # counted in the call's note, waited for before its reply
            kill_sweep(lambda table: self.timeout_victims(table, call), call.killed, hold)

        def victims(table):
            out = [p for p in table if table[p][4] == pid or ancestry_root(p, table, {pid}) == pid]
            out += escaped_from_shell(table)
            return out + self.timeout_victims(table, call) if call is not None else out

        killed = set()  # type: set[tuple[int, int]]
        kill_sweep(victims, killed, hold)
        proc.wait()
        self.forget()
        wait_dead(killed)  # whoever asked for the kill must not still see them
        return len(killed) + 1

    def restart(self):
        call = self.call
        if self.proc is not None:
            self.kill(call)
        if call is not None:
            self.finish(None, "[orsbox: the shell was restarted while this command ran]")
        self.start()

    # -- calls

    def run(self, rid, command, timeout, cap):
        notes = []
        if self.proc is not None and self.proc.poll() is not None:
            notes.append("[orsbox: the shell had exited; a fresh shell was started]")
            self.forget()
        if self.proc is None:
            self.start()
        capture = Capture(cap)
        capture.add(self.between.result()[0])
        self.between = Capture(65536)
        self.call = ShellCall(rid, capture, timeout, notes)
        self.call.earlier_jobs = read_children(self.children)
        try:
            command = command.replace(b"\0", b"")
            if self.script is not None:  # written before the line that sources it
                quoted = b"'" + command.replace(b"'", b"'\\''") + b"'"
                os.lseek(self.script, 0, os.SEEK_SET)
                os.ftruncate(self.script, 0)
                write_all(self.script, b"__orsbox_c=" + quoted + b"\n" + self.eval)
                os.write(self.stdin_pipe().fileno(), self.line)
            else:
                os.write(self.stdin_pipe().fileno(), self.line)
                os.write(self.cmd_w, command + b"\0")
        except OSError:
            pass  # the shell died: `tick` notices and reports it

    def finish(self, code, note=None):
        call, self.call = self.call, None
        assert call is not None, "no call to finish"
        if call.timed_out:
            wait_dead(call.killed)
        if call.replied:
            return  # what the shell printed since, and `note`, go nowhere
        if call.timed_out:
            call.notes.append(timeout_note(call))
        if note:
            call.notes.append(note)
        self.guest.reply_result(call, None if call.timed_out else code)

    def hold_and_reply(self, call):
        """The timeout sweep's `hold`: stop the shell's group again and, once the call's
        reply is due (REPLY_DUE_S after its timeout), send it while the sweep goes on.
        Under gVisor killing a stopped fork bomb's few hundred processes one by one took
        1-2 s. The shell's next command still waits for the sweep and the shell's
        prompt (the call stays the shell's until `finish`), and this single-threaded
        guest reads no other request meanwhile: no caller sees the killed alive. What
        the command prints after the reply is dropped."""
        self.hold_group()
        if call.replied or time.time() < call.deadline + REPLY_DUE_S:
            return
        call.replied = True
        note = (
            f"[orsbox: timed out after {call.timeout:g}s; the processes it started are stopped"
            f" and being killed ({len(call.killed)} found so far)]"
        )
        self.guest.reply_result(call, None, [note])

    # -- output

    def on_output(self, fd):
        data = read_ready(fd)
        if data is None:
            return
        if not data:  # every writer is gone: bash exited; `tick` or `run` reaps it
            self.close_output()
            return
        self.scan(self.pending + data)

    def scan(self, data):
        """Split the stream at the sentinel, which a read may have cut in two.

        A command can read the shell's token (`declare -f`) and print a look-alike: only
        the token followed by a status of 1-3 digits and NUL ends the call; anything
        else after the token is output. A look-alike with a valid status does end the
        call early (the rest of its output then joins the next call's)."""
        if self.call is None:
            self.between.add(data)
            self.pending = b""
            return
        start = 0
        while True:
            at = data.find(self.sentinel, start)
            if at < 0:
                keep = max(len(data) - len(self.sentinel) - STATUS_MAX, 0)
                self.call.capture.add(data[:keep])
                self.pending = data[keep:]
                return
            status_at = at + len(self.sentinel)
            status = data[status_at : status_at + STATUS_MAX + 1]
            end = status.find(b"\0")
            if end > 0 and status[:end].isdigit():
                break
            if end < 0 and len(status) <= STATUS_MAX and (status.isdigit() or not status):
                self.call.capture.add(data[:at])  # the rest of it is still on its way
                self.pending = data[at:]
                return
            start = at + 1  # not a sentinel: output
        self.call.capture.add(data[:at])
        self.pending = b""
        if self.call.timed_out:
            # The shell is back at its prompt: what the rest of the command line started
            # after the last sweep (`sleep 9; daemon &`) is found now. No need to stop
            # it: it printed the sentinel, so every fork the command line made is done.
            self.sweep(self.call, hold=False)
        self.finish(int(status[:end]))
        rest = data[status_at + end + 1 :]
        if rest:
            self.between.add(rest)

    def drain(self):
        while self.out_open:
            try:
                data = os.read(self.out_r, READ_CHUNK)
            except OSError:
                return
            if not data:
                self.close_output()
                return
            self.scan(self.pending + data)

    # -- time

    def tick(self):
        """Each loop turn while a call runs: a shell that died, a call past its time."""
        call = self.call
        if call is None:
            return
        if self.running().poll() is not None:
            self.on_shell_exit()
        elif not call.timed_out:
            if time.time() >= call.deadline:
                self.on_timeout(call)
        elif time.time() >= call.grace:
            # Still not back at its prompt: a builtin loop, or the rest of the command
            # line starting process after process. Only killing the shell stops it.
            self.kill(call)
            self.finish(None, SHELL_KILLED)
            self.start()
        elif time.time() >= call.next_sweep:
            # The shell may be running the rest of the command line (`sleep 9; make`):
            # what that starts is killed too, until the shell is back at its prompt. Each
            # command it runs is a child of it; only a new one is worth stopping it for
            # (a loaded shell that is merely on its way back should not be held up).
            call.next_sweep = time.time() + POLL_S
            known = call.earlier_jobs | {pid for pid, _ in call.killed}
            if read_children(self.children) - known:
                self.sweep(call)

    def on_shell_exit(self):
        self.drain()
        if self.call is None:  # the sentinel made it out first
            return
        code = exit_code_of(self.running().returncode)
        if self.call.timed_out:
            self.sweep(self.call)
        self.forget()
        self.finish(code, f"[orsbox: the shell exited (code {code}); a fresh shell was started]")
        self.start()

    def on_timeout(self, call):
        call.timed_out = True
        self.sweep(call)
        call.grace = time.time() + SHELL_GRACE_S
        call.next_sweep = time.time() + POLL_S

    def sweep(self, call, hold=True):
        """Kill what the command started (`timeout_victims`). With `hold` the shell's
        process group is stopped meanwhile, before every pass (`hold_and_reply`), and
        continued after: the shell cannot start the next part of the command line
        between two passes, and what the command runs in the group (a fork bomb's
        every process) stops forking at once. Returns how many processes were new to
        `call.killed`.

        The shell is known to be stopped before the first pass: SIGSTOP takes effect
        only on its way back to user space, so a fork it is in the middle of completes
        and the child would appear after passes that had already looked."""
        proc = self.running()
        shell = proc.pid
        held = hold and proc.returncode is None  # a reaped pid could be another's
        if held:
            self.hold_and_reply(call)
            wait_stopped(shell)
        try:
            return kill_sweep(
                lambda table: self.timeout_victims(table, call),
                call.killed,
                (lambda: self.hold_and_reply(call)) if held else None,
            )
        finally:
            if held:
                with contextlib.suppress(OSError):
                    os.killpg(shell, signal.SIGCONT)

    def hold_group(self):
        """SIGSTOP the shell's process group (the shell, what it runs, its earlier
        background jobs; `sweep` continues them all after)."""
        with contextlib.suppress(OSError):
            os.killpg(self.running().pid, signal.SIGSTOP)

    def timeout_victims(self, table, call):
        """What the command started: descendants of the shell, and orphans (parent 1)
        that began after it, except what a one-off exec or a `docker exec` owns, and the
        background jobs of earlier calls (with what they started)."""
        me, shell = os.getpid(), self.running().pid
        protected = self.guest.exec_pids() | call.earlier_jobs
        since = call.start_tick
        out = []
        for pid, (_, sid, start, _, _) in table.items():
            if pid in (1, me, shell) or start < since or sid in protected:
                continue
            root = ancestry_root(pid, table, protected | {shell, me})
            # (a root missing from the table: a parent that vanished while the table was
            # read; the sweep's next pass, which must also come up empty, looks again)
            orphan = root in table and table[root][0] == 1
            if root == shell or (orphan and root not in protected and root != me):
                out.append(pid)
        return out


SHELL_MARK_NAME = "ORSBOX_SHELL"  # set in the shell's environment, so inherited by what it starts
SHELL_MARK = SHELL_MARK_NAME.encode() + b"=1\0"


EXEC_MARK_NAME = "ORSBOX_EXEC"  # set per one-off exec, to its request id


def carries_mark(pid, mark):
    """Whether the process started with `mark` (`NAME=value\\0`) in its environment: how
    a process the shell or an exec started is known after it has left that tree and
    session (`setsid` in a double fork). One that cleared its environment is not
    recognised; it still dies with the sandbox."""
    try:
        with open(f"/proc/{pid}/environ", "rb") as f:
            return mark in b"\0" + f.read()
    except OSError:
        return False


def escaped_from_shell(table, mark=SHELL_MARK):
    """Orphans the shell (or, with an exec's `mark`, that exec) started (their oldest
    living ancestor's parent is init), with everything they started. Not the
    container's own command, the guest or another's orphans: none carries the mark."""
    marked = {}
    out = []
    for pid in table:
        root = ancestry_root(pid, table, ())
        if root not in table or table[root][0] != 1:
            continue
        if root not in marked:
            marked[root] = carries_mark(root, mark)
        if marked[root]:
            out.append(pid)
    return out


SHELL_KILLED = (
    "[orsbox: the shell was still running the command after its processes were killed"
    " (a shell loop, or more of the command line), so the shell was killed and restarted: "
    "cwd, variables, functions and background jobs are lost]"
)


# ---------------------------------------------------------------------------- one-off exec


class ExecCall:
    """One command outside the persistent shell, in its own session so a timeout can
    kill its whole tree. It finishes when its process exits (after a short last read),
    not when every background child has closed the output pipe."""

    def __init__(self, guest, rid, req, stdin):
        self.guest, self.rid = guest, rid
        self.mark = f"{os.getpid()}-{rid}"  # unique among guests (a sub-guest counts its own)
        self.capture = Capture(req.get("cap", 65536))
        self.timeout = float(req.get("timeout", 60))
        self.started = time.time()
        self.deadline = self.started + self.timeout
        self.oom_before = oom_count()
        self.timed_out, self.exited_at, self.notes = False, None, []
        self.killed = set()
        self.stdin = memoryview(stdin)
        self.proc = self.spawn(req, bool(stdin))
        os.set_blocking(self.proc.stdout.fileno(), False)
        guest.sel.register(self.proc.stdout.fileno(), selectors.EVENT_READ, self.on_output)
        if stdin:
            os.set_blocking(self.proc.stdin.fileno(), False)
            guest.sel.register(self.proc.stdin.fileno(), selectors.EVENT_WRITE, self.on_stdin)
        self.out_open = True

    def spawn(self, req, has_stdin):
        argv = req["argv"] if "argv" in req else ["bash", "-c", req["cmd"]]
        env = dict(os.environ)
        env.update(req.get("env") or {})
        env[EXEC_MARK_NAME] = self.mark
        return subprocess.Popen(
            argv,
            stdin=subprocess.PIPE if has_stdin else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=req.get("cwd") or None,
            env=env,
            start_new_session=True,
            preexec_fn=prepare_child,
        )

    def on_stdin(self, fd):
        try:
            n = os.write(fd, self.stdin[:READ_CHUNK])
        except OSError:
            n = len(self.stdin)  # the command stopped reading; drop the rest
        self.stdin = self.stdin[n:]
        if not self.stdin:
            self.guest.sel.unregister(fd)
            self.proc.stdin.close()

    def on_output(self, fd):
        data = read_ready(fd)
        if data is None:
            return
        if data:
            self.capture.add(data)
        else:
            self.close_output()

    def close_output(self):
        if self.out_open:
            self.guest.sel.unregister(self.proc.stdout.fileno())
            self.proc.stdout.close()
            self.out_open = False

    def tick(self):
        now = time.time()
        if self.exited_at is None and self.proc.poll() is not None:
            self.exited_at = now
        if self.exited_at is not None:
            if not self.out_open or now - self.exited_at > 0.1:
                self.finish()
        elif now >= self.deadline and not self.timed_out:
            self.timed_out = True
            pid = self.proc.pid
            mark = f"{EXEC_MARK_NAME}={self.mark}".encode() + b"\0"
            n = kill_sweep(
                lambda t: (
                    [p for p in t if t[p][1] == pid or ancestry_root(p, t, {pid}) == pid]
                    + escaped_from_shell(t, mark)
                ),
                self.killed,
            )
            self.notes.append(
                f"[orsbox: timed out after {self.timeout:g}s; killed {n} process(es)]"
            )

    def finish(self):
        while self.out_open:
            try:
                data = os.read(self.proc.stdout.fileno(), READ_CHUNK)
            except OSError:
                break
            if not data:
                break
            self.capture.add(data)
        self.close_output()
        if self.stdin:
            self.guest.sel.unregister(self.proc.stdin.fileno())
            self.proc.stdin.close()
        del self.guest.execs[self.rid]
        if self.timed_out:
            wait_dead(self.killed)
        code = exit_code_of(self.proc.returncode)
        self.guest.reply_result(self, None if self.timed_out else code)


# ---------------------------------------------------------------------------- files


class FileError(Exception):
    pass


def describe_os_error(e, path):
    if isinstance(e, FileNotFoundError):
        return f"no such file: {path}"
    if isinstance(e, PermissionError):
        return f"permission denied: {path}"
    if isinstance(e, IsADirectoryError):
        return f"is a directory: {path}"
    if isinstance(e, NotADirectoryError):
        return f"not a directory: a parent of {path} is a file"
    if e.errno == errno.ENOSPC:
        return f"no space left on device: {path}"
    if e.errno == errno.EROFS:
        return f"read-only file system: {path}"
    return f"{e.strerror or e}: {path}"


def read_file(path, max_bytes):
    try:
        st = os.stat(path)
        if stat.S_ISDIR(st.st_mode):
            raise FileError(f"is a directory: {path}")
        if not stat.S_ISREG(st.st_mode):
            raise FileError(f"not a regular file: {path}")
        if max_bytes is not None and st.st_size > max_bytes:
            raise FileError(too_large(path, st.st_size, max_bytes))
        with open(path, "rb") as f:
            data = f.read() if max_bytes is None else f.read(max_bytes + 1)
    except OSError as e:
        raise FileError(describe_os_error(e, path)) from None
    if max_bytes is not None and len(data) > max_bytes:
        raise FileError(too_large(path, len(data), max_bytes))
    return data


def too_large(path, size, limit):
    size_text = size if size <= limit + 1 else f"more than {limit}"
    return f"file too large: {path} is {size_text} bytes, over the {limit}-byte limit"


def write_file(path, data, mode):
    try:
        if os.path.isdir(path):
            raise FileError(f"is a directory: {path}")
        parent = os.path.dirname(path)
        if parent:
            os.makedirs(parent, exist_ok=True)
        # mode None keeps an existing file's permissions (edits must not drop +x)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644 if mode is None else mode)
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view) :]
            if mode is not None:
                os.fchmod(fd, mode)
        finally:
            os.close(fd)
    except FileExistsError:
        raise FileError(f"not a directory: a parent of {path} is a file") from None
    except OSError as e:
        raise FileError(describe_os_error(e, path)) from None


def untar(dest, data):
    import tarfile  # here, not at the top: a fifth of the guest's start, for a rare op

    try:
        os.makedirs(dest, exist_ok=True)
        with tarfile.open(fileobj=io.BytesIO(data)) as tar:
            if hasattr(tarfile, "data_filter"):
                tar.extractall(dest, filter="data")
            else:
                tar.extractall(dest)
    except OSError as e:
        raise FileError(describe_os_error(e, dest)) from None
    except tarfile.TarError as e:
        raise FileError(f"could not unpack into {dest}: {e}") from None


# ---------------------------------------------------------------------------- the loop


class Guest:
    def __init__(self, dead_man):
        self.dead_man = dead_man
        self.sel = selectors.DefaultSelector()
        self.inbuf = bytearray()
        self.execs = {}
        self.shell = Shell(self)
        self.shell_queue = collections.deque()  # type: collections.deque[tuple[int, bytes, float, int]]
        self.oom_supported = oom_count() is not None
        os.set_blocking(0, False)
        self.sel.register(0, selectors.EVENT_READ, self.on_stdin)

    def exec_pids(self):
        return set(call.proc.pid for call in self.execs.values())

    def watch_memory(self, watch):
        """Kill the largest process the commands started when memory is short
        (`MemoryWatch`); the running calls' replies name it."""
        me = os.getpid()
        shell = self.shell.proc.pid if self.shell.proc is not None else None

        def victims(table):
            # Not PID 1, this guest or a sub-guest (parent outside: 0), nor the shell
            # itself (its state is the session's); anything else is a command's.
            return [p for p in table if p not in (1, me, shell) and table[p][0] != 0]

        notes = watch.check(victims)
        if not notes:
            return
        calls = list(self.execs.values())
        if self.shell.call is not None:
            calls.append(self.shell.call)
        for call in calls:
            call.notes.extend(notes)

    def serve(self):
        while True:
            busy = self.shell.call is not None or self.execs or self.shell_queue
            for key, _ in self.sel.select(POLL_S if busy else None):
                key.data(key.fd)
            if busy and MEMORY_WATCH is not None:
                self.watch_memory(MEMORY_WATCH)
            self.shell.tick()
            for call in list(self.execs.values()):
                call.tick()
            if self.shell.call is None and self.shell_queue:
                self.shell.run(*self.shell_queue.popleft())

    # -- input

    def on_stdin(self, fd):
        data = read_ready(fd)
        if data is None:
            return
        if not data:
            self.stop()
        self.inbuf += data
        while len(self.inbuf) >= HEAD.size:
            hlen, plen = HEAD.unpack_from(self.inbuf)
            end = HEAD.size + hlen + plen
            if len(self.inbuf) < end:
                return
            header = json.loads(bytes(self.inbuf[HEAD.size : HEAD.size + hlen]).decode())
            payload = bytes(self.inbuf[HEAD.size + hlen : end])
            del self.inbuf[:end]
            self.dispatch(header, payload)

    def dispatch(self, req, payload):
        rid = req.get("id")
        try:
            self.handle(rid, req.get("op"), req, payload)
        except FileError as e:
            self.reply(rid, {"ok": False, "kind": "file", "error": str(e)})
        except Exception as e:  # one bad request must not take the guest down
            log(f"request {req.get('op')!r} failed: {e!r}")
            self.reply(rid, {"ok": False, "kind": "bad", "error": f"{type(e).__name__}: {e}"})

    def handle(self, rid, op, req, payload):
        if op == "hello":
            set_address_space(req.get("address_space"))
            watch_memory(req.get("memory_bound"))
            self.oom_supported = oom_count() is not None
            info = {"ok": True, "pid": os.getpid(), "uid": os.getuid(), "oom": self.oom_supported}
            self.reply(rid, info)
            if req.get("shell") and self.shell.proc is None:
                self.shell.start()  # while the host passes the sandbox on: its first call is soon
        elif op == "shell":
            # Queued, not refused: a host that gave up waiting may send the next command
            # while the previous one still runs to its own timeout.
            self.shell_queue.append((rid, payload, float(req["timeout"]), int(req["cap"])))
        elif op == "restart":
            self.shell.restart()
            self.reply(rid, {"ok": True})
        elif op == "killall":
            killed, running = self.kill_all()
            self.reply(rid, {"ok": True, "killed": killed, "running": running[:RUNNING_LISTED]})
        elif op == "exec":
            self.start_exec(rid, req, payload)
        elif op == "read":
            self.reply(rid, {"ok": True}, read_file(req["path"], req.get("max")))
        elif op == "write":
            mode = req.get("mode", 0o644)
            write_file(req["path"], payload, None if mode is None else int(mode))
            self.reply(rid, {"ok": True})
        elif op == "untar":
            untar(req["path"], payload)
            self.reply(rid, {"ok": True})
        else:
            raise ValueError(f"unknown op {op!r}")

    def kill_all(self):
        """Kill every process the sandbox's user could have started: all but the
        container's own (PID 1 and what started before this guest), processes entered
        from outside (this guest, sub-guests: their parent is outside, pid 0) and this
        guest's ancestors. Before grading, so nothing the LLM agent left running can change
        files or forge results while the grader runs. The shell starts afresh on the
        next call. A process of another user may survive (no CAP_KILL): none of the
        agent's could have changed user (no-new-privileges, no capabilities).
        Returns how many were killed and the command lines of those found running
        first, the idle shell aside (for the grader's reward-hacking report)."""
        me = os.getpid()
        table = process_table()
        born = table[me][2] if me in table else 0
        keep = {1, me}
        pid = me
        while pid in table and pid not in (0, 1):
            keep.add(pid)
            pid = table[pid][0]

        def ours(entry):
            # Started after the guest; in the guest's own clock tick only if not a child
            # of PID 1, as a container command started just before the guest may be.
            ppid, _, started, _, _ = entry
            return started > born or (started == born and ppid != 1)

        def victims(table):
            return [p for p in table if p not in keep and table[p][0] != 0 and ours(table[p])]

        shell, count = self.shell, 0
        idle_shell = shell.proc.pid if shell.proc is not None else None
        running = [command_line(p) for p in sorted(victims(table)) if p != idle_shell]
        if shell.proc is not None:
            call = shell.call
            count = shell.kill(call)
            if call is not None:
                shell.finish(None, "[orsbox: every process was killed while this command ran]")
        killed = set()  # type: set[tuple[int, int]]
        kill_sweep(victims, killed)
        wait_dead(killed)
        return count + len(killed), [c for c in running if c is not None]

    def start_exec(self, rid, req, stdin):
        cwd = req.get("cwd")
        if cwd and not os.path.isdir(cwd):
            self.reply_plain(rid, f"[orsbox: no such directory: {cwd}]\n", 1)
            return
        try:
            self.execs[rid] = ExecCall(self, rid, req, stdin)
        except FileNotFoundError as e:
            self.reply_plain(rid, "%s: command not found\n" % (e.filename or req.get("argv")), 127)
        except OSError as e:  # EAGAIN when the pids limit is reached
            self.reply_plain(rid, f"[orsbox: could not start the command: {e}]\n", 126)

    # -- output

    def reply(self, rid, header, payload=b""):
        header["id"] = rid
        raw = json.dumps(header).encode()
        if len(payload) < 1 << 18:  # one write, so one docker frame, for small replies
            write_all(1, HEAD.pack(len(raw), len(payload)) + raw + payload)
            return
        write_all(1, HEAD.pack(len(raw), len(payload)) + raw)
        write_all(1, payload)

    def reply_plain(self, rid, text, code):
        data = text.encode()
        header = {"ok": True, "exit": code, "timed_out": False, "truncated": False}
        header.update({"bytes": len(data), "oom": False, "duration": 0.0})
        self.reply(rid, header, data)

    def reply_result(self, call, code, more_notes=()):
        output, truncated = call.capture.result()
        after = oom_count()
        oom = call.oom_before is not None and after is not None and after > call.oom_before
        notes = list(call.notes) + list(more_notes)
        if oom:
            notes.append("[orsbox: killed: out of memory (the sandbox's memory limit)]")
        if notes:
            sep = b"" if not output or output.endswith(b"\n") else b"\n"
            output += sep + "\n".join(notes).encode() + b"\n"
        header = {"ok": True, "exit": code, "timed_out": call.timed_out, "truncated": truncated}
        header.update(
            {"bytes": call.capture.total, "oom": oom, "duration": time.time() - call.started}
        )
        self.reply(call.rid, header, output)

    # -- the end

    def stop(self):
        """stdin closed: the host is gone. As the dead-man's switch, end the container.
        The guest is its command, so its exit alone would do under init; but an image's
        entrypoint may run the command as a child and outlive it, so PID 1 is told too
        and every other process is killed (the guest may die of the SIGTERM on the way,
        which ends the container all the same)."""
        if not self.dead_man:
            os._exit(0)
        log("stdin closed: the server is gone; stopping the container")
        me = os.getpid()
        with contextlib.suppress(OSError):
            os.kill(1, signal.SIGTERM)
        # PID 1 ignores SIGKILL from inside its namespace; killing its child ends it.
        kill_sweep(lambda table: [p for p in table if p not in (1, me)])
        os._exit(0)


def write_all(fd, data):
    view = memoryview(data)
    while view:
        try:
            view = view[os.write(fd, view) :]
        except BlockingIOError:
            select.select([], [fd], [])


def main(argv):
    global OOM
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    OOM = OomCounter()
    guest = Guest(dead_man="--sub" not in argv)
    guest.serve()


if __name__ == "__main__":
    main(sys.argv[1:])
