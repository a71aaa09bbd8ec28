"""Processes inside the sandbox: the process table read from /proc, and kill sweeps
that end what a command started, fork bombs included."""

import _signal as signal  # its C core (the package docstring says why)
import math
import os
import time

from .quiet import suppress

SWEEP_LIMIT_S = 3.0  # a kill sweep repeats until quiet, but not for longer than this
STOP_WAIT_S = 0.5  # how long a sweep waits for the shell to show as stopped
DEATH_WAIT_S = 1.0  # how long a timed-out call's reply waits for its killed processes to die
KILLS_PER_HOLD = 8  # a long kill pass stops the held group again (and replies if due) this often
CLK_TCK = os.sysconf("SC_CLK_TCK")
STOPPED_OR_DEAD = (b"T", b"t", b"Z", b"X")  # /proc/PID/stat states


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


LISTEN = "0A"  # a TCP socket's state in /proc/net/tcp: listening


def listening_sockets():
    """The inodes of the container's listening TCP sockets (IPv4 and IPv6)."""
    inodes = set()
    for name in ("/proc/net/tcp", "/proc/net/tcp6"):
        with suppress(OSError), open(name) as f:
            for line in f.readlines()[1:]:
                fields = line.split()
                if len(fields) > 9 and fields[3] == LISTEN:
                    inodes.add(f"socket:[{fields[9]}]")
    return inodes


def services(pids, table):
    """Of `pids`, the services: those holding a listening TCP socket, and everything
    they started (a server's workers), as a set of pids. What a grader keeps running
    when a task's state may be a running service (a web server, sshd, a database)."""
    sockets = listening_sockets()
    listeners = set()
    for pid in pids if sockets else ():
        with suppress(OSError):
            for fd in os.listdir(f"/proc/{pid}/fd"):
                with suppress(OSError):
                    if os.readlink(f"/proc/{pid}/fd/{fd}") in sockets:
                        listeners.add(pid)
                        break
    return {pid for pid in pids if ancestry_root(pid, table, listeners) in listeners}


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
        with suppress(OSError):
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


def exit_code_of(returncode):
    return 128 - returncode if returncode < 0 else returncode
