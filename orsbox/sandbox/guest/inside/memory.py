"""Memory: the cgroup's OOM kills, gVisor's missing OOM killer (`MemoryWatch`), and the
limits each command starts with. What the hello asks for is kept in one `Memory`
object the guest passes to whatever starts or reports on commands."""

import _signal as signal  # its C core (the package docstring says why)
import os
import resource
import time

from .processes import command_line, process_table, wait_dead
from .quiet import suppress

GROWTH_WINDOW_S = 0.5  # a look older than this says nothing of how fast memory grows now
# From a look past the bound to the next look that sees its kills' memory free: the look,
# the kills, their deaths and the loop's turn took 0.2-0.35 s with the host loaded. The
# lower end: 0.3 s killed more of the processes for no lower peak (BENCHMARKS.md, "The
# memory watch's race")
KILL_LAG_S = 0.2
OOM_FILES = ("/sys/fs/cgroup/memory/memory.oom_control", "/sys/fs/cgroup/memory.events")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


class Memory:
    """The guest's memory bounds and counts: the cgroup's OOM counter, the memory watch
    when the hello asks for one, and the address space (RLIMIT_AS) each command gets."""

    def __init__(self):
        self.oom = OomCounter()
        self.watch = None  # a MemoryWatch, when the hello asks for one
        self.address_space = None  # the hello's "address_space": each command's RLIMIT_AS

    def configure(self, address_space, memory_bound):
        """What the hello asks for (`options.guest_memory_bounds` on the host)."""
        self.address_space = int(address_space) if address_space else None
        if memory_bound and self.watch is None:
            with suppress(OSError):
                self.watch = MemoryWatch(int(memory_bound))

    def oom_count(self):
        """OOM kills so far: the cgroup's, and the guest's own (`MemoryWatch`)."""
        counted = self.oom.read()
        if self.watch is None:
            return counted
        return (counted or 0) + self.watch.kills

    def prepare_child(self):
        """Run in each child before exec."""
        raise_oom_score()
        self.bound_address_space()

    def bound_address_space(self):
        """Cap this process's address space (RLIMIT_AS) at the hello's `address_space`.

        The host asks for it under gVisor, which has no OOM killer inside: one process
        allocating past the sandbox's memory would end the whole sandbox (the host kills
        gVisor's Sentry). Bounded, its allocation fails inside (ENOMEM: a MemoryError,
        malloc returning NULL) and the sandbox lives on. gVisor enforces RLIMIT_AS on
        every mapping; its RLIMIT_DATA covers only brk, so large mallocs (mmap) pass it."""
        if self.address_space is None:
            return
        limit = self.address_space
        with suppress(OSError, ValueError):
            resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def raise_oom_score():
    """Make this process, not the guest or PID 1, the OOM victim."""
    try:
        with open("/proc/self/oom_score_adj", "w") as f:
            f.write("1000")
    except OSError:
        pass


class OomCounter:
    """The cgroup's count of OOM kills (v1 memory.oom_control, v2 memory.events),
    read with one pread on a descriptor kept open: it is read twice per command."""

    def __init__(self):
        self.fd = None
        self.path = None  # the file it reads (the native sleeper reads it too)
        for path in OOM_FILES:
            try:
                fd = os.open(path, os.O_RDONLY)
            except OSError:
                continue
            self.fd = fd
            if self.read() is not None:
                self.path = path
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
        self.last_look = None  # (monotonic time, bytes in use) of the previous look

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

    def growth(self, used):
        """What the commands may add before this look's kills free anything: the rate
        the memory in use grew at since the previous look (if that was recent) over
        KILL_LAG_S, at most half the bound. Killing only the excess seen lost the race
        to eight processes allocating at once (~0.9 GiB/s together, under load): they
        reached the host's bound before the next look (docs/gvisor.md, 'oom')."""
        now = time.monotonic()
        last, self.last_look = self.last_look, (now, used)
        if last is None or not 0 < now - last[0] <= GROWTH_WINDOW_S:
            return 0
        rate = max(0, used - last[1]) / (now - last[0])
        return min(int(rate * KILL_LAG_S), self.bound // 2)

    def check(self, victims):
        """Kill the largest of `victims(table)`, as many as hold the excess and the
        growth (`growth`), if the memory in use inside is past the bound; returns a
        note naming each."""
        used = self.used()
        if used is None:
            return []
        growth = self.growth(used)
        if used <= self.bound:
            return []
        table = process_table()
        sizes = sorted(((resident_bytes(pid), pid) for pid in victims(table)), reverse=True)
        notes, over, killed = [], used - self.bound + growth, set()
        for size, pid in sizes:  # the largest first, until what they hold covers `over`
            if over <= 0 or not size:
                break
            name = command_line(pid) or "?"
            with suppress(OSError):
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
