"""A one-off exec: one command outside the persistent shell (`exec` in the contract),
with its own environment, folder, stdin and timeout."""

import os
import time

from . import spawn
from .capture import Capture
from .marks import EXEC_MARK_NAME, escaped_from_shell
from .processes import ancestry_root, exit_code_of, kill_sweep, wait_dead
from .watch import READ, WRITE
from .wire import READ_CHUNK, read_ready


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
        self.oom_before = guest.memory.oom_count()
        self.timed_out, self.exited_at, self.notes = False, None, []
        self.reap_checks = 0  # looks for its exit since its output ended (`reap_wait`)
        self.killed = set()
        self.stdin = memoryview(stdin)
        self.proc = self.spawn(req, bool(stdin))
        os.set_blocking(self.proc.stdout.fileno(), False)
        guest.descriptors.register(self.proc.stdout.fileno(), READ, self.on_output)
        if stdin:
            os.set_blocking(self.proc.stdin.fileno(), False)
            guest.descriptors.register(self.proc.stdin.fileno(), WRITE, self.on_stdin)
        self.out_open = True

    def spawn(self, req, has_stdin):
        argv = req["argv"] if "argv" in req else ["bash", "-c", req["cmd"]]
        env = dict(os.environ)
        env.update(req.get("env") or {})
        env[EXEC_MARK_NAME] = self.mark
        return spawn.start(
            argv,
            env,
            stdin=spawn.PIPE if has_stdin else spawn.DEVNULL,
            stdout=spawn.PIPE,
            stderr=spawn.STDOUT,
            cwd=req.get("cwd") or None,
            new_session=True,
            before_exec=self.guest.memory.prepare_child,
        )

    def on_stdin(self, fd):
        try:
            n = os.write(fd, self.stdin[:READ_CHUNK])
        except OSError:
            n = len(self.stdin)  # the command stopped reading; drop the rest
        self.stdin = self.stdin[n:]
        if not self.stdin:
            self.guest.descriptors.unregister(fd)
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
            self.guest.descriptors.unregister(self.proc.stdout.fileno())
            self.proc.stdout.close()
            self.out_open = False

    def reap_wait(self, longest):
        """How soon the loop looks again for this command's exit: its output ends as it
        exits, microseconds before the process can be reaped (in a container often
        after the guest woke for the EOF), so at 0.5, 1, 2... ms from then on, up to
        `longest`, not `longest` at once (a 50 ms wait on every short exec). A process
        that closed its output and runs on is soon looked at every `longest`. None: no
        hurry (its output is open, or it was reaped)."""
        if self.out_open or self.exited_at is not None:
            return None
        wait = min(longest, 0.0005 * 2**self.reap_checks)
        self.reap_checks += 1
        return wait

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
            self.guest.descriptors.unregister(self.proc.stdin.fileno())
            self.proc.stdin.close()
        del self.guest.execs[self.rid]
        if self.timed_out:
            wait_dead(self.killed)
        code = exit_code_of(self.proc.returncode)
        self.guest.reply_result(self, None if self.timed_out else code)
