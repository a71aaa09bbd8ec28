"""The guest's loop: one selector over stdin (the host's requests), the shell's output
and each one-off exec's pipes; each request dispatched to the module that does it, each
reply framed back on stdout. `main` is what the loader calls."""

import _signal as signal  # its C core (the package docstring says why)
import os
import sys
import time
from _collections import deque  # its C core (the package docstring says why)

from .files import FileError, read_file, untar, write_file
from .keep import keep
from .memory import Memory
from .one_off import ExecCall
from .processes import (
    RUNNING_LISTED,
    command_line,
    kill_sweep,
    process_table,
    services,
    wait_dead,
)
from .quiet import suppress
from .shell import POLL_S, Shell
from .sleep import handed_off, sleep, woken_state
from .watch import READ, Watch
from .wire import FrameBuffer, log, read_ready, send_frame


class Guest:
    def __init__(self, memory, payload, dead_man):
        self.memory = memory
        self.payload = payload
        self.kept = None  # the path of the payload's copy (`keep`), once asked for
        self.dead_man = dead_man
        self.descriptors = Watch()
        self.frames = FrameBuffer()
        self.execs = {}
        self.shell = Shell(self)
        self.shell_queue = deque()  # type: deque[tuple[int, bytes, float, int]]
        self.oom_supported = memory.oom_count() is not None
        self.sleep_after = None  # the hello's: idle seconds before the guest sleeps
        self.payload_digest = None  # the hello's: the payload's SHA-256, for the sleep
        self.sleeper = None  # the hello's payload: the native sleeper's executable (`sleep`)
        self.sleeper_fd = None  # ... once kept in a sealed memfd, at the first sleep
        self.idle_since = None  # monotonic time the guest last became idle
        os.set_blocking(0, False)
        self.descriptors.register(0, READ, self.on_stdin)

    def exec_pids(self):
        return set(call.proc.pid for call in self.execs.values())

    def watch_memory(self):
        """Kill the largest process the commands started when memory is short
        (`MemoryWatch`); the running calls' replies name it."""
        me = os.getpid()
        shell = self.shell.proc.pid if self.shell.proc is not None else None

        def victims(table):
            # Not PID 1, this guest or a sub-guest (parent outside: 0), nor the shell
            # itself (its state is the session's); anything else is a command's.
            return [p for p in table if p not in (1, me, shell) and table[p][0] != 0]

        notes = self.memory.watch.check(victims)
        if not notes:
            return
        calls = list(self.execs.values())
        if self.shell.call is not None:
            calls.append(self.shell.call)
        for call in calls:
            call.notes.extend(notes)

    def busy(self):
        return self.shell.call is not None or bool(self.execs) or bool(self.shell_queue)

    def wait_s(self, busy):
        """How long the loop may wait for a descriptor: when idle, forever or until it
        is time to sleep; POLL_S while work runs (exits and deadlines are polled), less
        while an exec's exit is due."""
        if not busy:
            if self.sleep_after is None or self.idle_since is None:
                return self.sleep_after
            return max(0.0, self.idle_since + self.sleep_after - time.monotonic())
        waits = [call.reap_wait(POLL_S) for call in self.execs.values()]
        return min([POLL_S] + [w for w in waits if w is not None])

    def serve(self):
        while True:
            busy = self.busy()
            for fd, callback in self.descriptors.ready(self.wait_s(busy)):
                callback(fd)
            if busy and self.memory.watch is not None:
                self.watch_memory()
            self.shell.tick()
            for call in list(self.execs.values()):
                call.tick()
            if self.shell.call is None and self.shell_queue:
                self.shell.run(*self.shell_queue.popleft())
            if self.sleep_after is not None:
                self.sleep_when_idle()

    def sleep_when_idle(self):
        """Count idle time from the last request or the last work's end; sleep once it
        reaches `sleep_after` (if the guest may not sleep then, count again)."""
        now = time.monotonic()
        if self.busy():
            self.idle_since = None
        elif self.idle_since is None:
            self.idle_since = now
        elif now - self.idle_since >= self.sleep_after:
            sleep(self)  # returns only if the guest stays awake
            self.idle_since = now

    # -- input

    def on_stdin(self, fd):
        data = read_ready(fd)
        if data is None:
            return
        self.idle_since = None
        if not data:
            self.stop()
        self.on_input(data)

    def on_input(self, data):
        for header, payload in self.frames.feed(data):
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
            self.memory.configure(req.get("address_space"), req.get("memory_bound"))
            self.oom_supported = self.memory.oom_count() is not None
            self.sleep_after = req.get("sleep_after")
            self.payload_digest = req.get("digest")
            self.sleeper = payload or None
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
            killed, running, kept = self.kill_all(req.get("keep") == "services")
            answer = {"ok": True, "killed": killed, "running": running[:RUNNING_LISTED]}
            self.reply(rid, dict(answer, kept=kept[:RUNNING_LISTED]))
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
        elif op == "keep":
            self.kept = keep(self.payload, self.kept)
            # and the python this guest runs on: a sub-guest is started with it, not with
            # whatever `python3` the sandbox's PATH finds by then (an agent's shim)
            python = os.path.realpath(sys.executable) if sys.executable else None
            self.reply(rid, {"ok": True, "path": self.kept, "python": python})
        else:
            raise ValueError(f"unknown op {op!r}")

    def wake(self, state):
        """Take up where the guest that slept left off (`sleep.py`)."""
        self.memory.configure(state["address_space"], None)
        self.oom_supported = self.memory.oom_count() is not None
        self.sleep_after, self.kept = state["sleep_after"], state["kept"]
        self.payload_digest = state["digest"]
        self.sleeper_fd = state.get("sleeper")
        if self.sleeper_fd is not None:
            os.set_inheritable(self.sleeper_fd, False)  # not into the commands it starts
        if state["shell"] is not None:
            self.shell.adopt(state["shell"])

    def take_over(self, handoff):
        """What the native sleeper read and did not answer (`sleep.handed_off`): the
        shell call it began, then the requests, as if this guest had read them."""
        call, requests, output, jobs = handoff
        if call is not None:
            self.shell.adopt_call(call, output, jobs)
        if requests:
            self.on_input(requests)

    def started_here(self, table):
        """A function that lists, in a process table, what the sandbox's user could have
        started: all but the container's own (PID 1 and what started before this
        guest, as `table` shows them), processes entered from outside (this guest,
        sub-guests: their parent is outside, pid 0) and this guest's ancestors. What
        `kill_all` kills, and what keeps the guest from sleeping."""
        me = os.getpid()
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

        def listed(table):
            return [p for p in table if p not in keep and table[p][0] != 0 and ours(table[p])]

        return listed

    def kill_all(self, keep_services=False):
        """Kill every process the sandbox's user could have started: all but the
        container's own (PID 1 and what started before this guest), processes entered
        from outside (this guest, sub-guests: their parent is outside, pid 0) and this
        guest's ancestors. Before grading, so nothing the LLM agent left running can change
        files or forge results while the grader runs. The shell starts afresh on the
        next call. A process of another user may survive (no CAP_KILL): none of the
        agent's could have changed user (no-new-privileges, no capabilities).
        With `keep_services`, the services (`processes.services`: what holds a listening
        TCP socket, and what it started) are left running, for a grader that guards
        them itself (the Harbor verifier's `inside/verifier_guard.py`).
        Returns how many were killed, the command lines of those found running first
        (the idle shell and the kept aside: for the grader's reward-hacking report) and
        the kept as [pid, start tick, command line]."""
        table = process_table()
        victims = self.started_here(table)
        kept = services(victims(table), table) if keep_services else set()
        if kept:
            everyone = victims
            victims = lambda table: [p for p in everyone(table) if p not in kept]  # noqa: E731
        shell, count = self.shell, 0
        idle_shell = shell.proc.pid if shell.proc is not None else None
        running = [command_line(p) for p in sorted(victims(table)) if p != idle_shell]
        if shell.proc is not None and shell.proc.pid not in kept:
            call = shell.call
            count = shell.kill(call, frozenset(kept))
            if call is not None:
                shell.finish(None, "[orsbox: every process was killed while this command ran]")
        killed = set()  # type: set[tuple[int, int]]
        kill_sweep(victims, killed)
        wait_dead(killed)
        listed = [[p, table[p][2], command_line(p)] for p in sorted(kept)]
        return count + len(killed), [c for c in running if c is not None], listed

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
        send_frame(1, header, payload)

    def reply_plain(self, rid, text, code):
        data = text.encode()
        header = {"ok": True, "exit": code, "timed_out": False, "truncated": False}
        header.update({"bytes": len(data), "oom": False, "duration": 0.0})
        self.reply(rid, header, data)

    def reply_result(self, call, code, more_notes=()):
        output, truncated = call.capture.result()
        after = self.memory.oom_count()
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
        with suppress(OSError):
            os.kill(1, signal.SIGTERM)
        # PID 1 ignores SIGKILL from inside its namespace; killing its child ends it.
        kill_sweep(lambda table: [p for p in table if p not in (1, me)])
        os._exit(0)


def main(argv, payload=b""):
    """Serve until stdin closes. `argv`: the loader's arguments (`--sub` for a
    sub-guest, `--wake FD` for a guest that slept, and `--handoff FD` if it slept as the
    native sleeper and that read what it could not answer); `payload`: what the loader ran,
    kept for sub-guests on request."""
    signal.signal(signal.SIGPIPE, signal.SIG_IGN)
    guest = Guest(Memory(), payload, dead_man="--sub" not in argv)
    state = woken_state(argv)
    if state is not None:
        guest.wake(state)
        handoff = handed_off(argv)
        if handoff is not None:
            guest.take_over(handoff)
    guest.serve()
