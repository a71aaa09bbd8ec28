"""The persistent shell: one `bash` per sandbox whose state (cwd, variables, functions,
background jobs) survives between calls, and the timeout sweeps of its commands."""

import _signal as signal  # its C core (the package docstring says why)
import os
import time

from . import spawn
from .capture import Capture
from .marks import SHELL_MARK_NAME, escaped_from_shell
from .processes import (
    ancestry_root,
    exit_code_of,
    kill_sweep,
    now_tick,
    open_children_file,
    read_children,
    wait_dead,
    wait_stopped,
)
from .quiet import suppress
from .watch import READ
from .wire import READ_CHUNK, read_ready, write_all

POLL_S = 0.05  # how often running children are polled for exit while work is active
SHELL_GRACE_S = 0.5  # after a timeout sweep, how long the shell gets to print its sentinel
REPLY_DUE_S = 0.5  # after a shell call's timeout, its reply goes out by then, sweep done or not
STATUS_MAX = 3  # digits in the sentinel's exit status ($? is 0-255)
SHELL_KILLED = (
    "[orsbox: the shell was still running the command after its processes were killed"
    " (a shell loop, or more of the command line), so the shell was killed and restarted: "
    "cwd, variables, functions and background jobs are lost]"
)


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


def prepare_shell(memory):
    """Run in the persistent shell before exec: its own process group, in the guest's
    session (not a session of its own). So its group is never an orphan while the shell
    lives (the shell's parent is in the same session, another group), and a timeout
    sweep's `killpg(SIGSTOP)` holds. gVisor sends SIGHUP and SIGCONT to an orphaned
    group with a stopped member whenever one of its processes exits (Linux only when it
    becomes orphaned): in a group of its own session, every exit of a stopped fork
    bomb's process continued the whole bomb again, and the sweep's passes ran against a
    bomb that kept forking (1-8 s for a pass)."""
    os.setpgid(0, 0)
    memory.prepare_child()


def timeout_note(call):
    killed = len(call.killed)
    return f"[orsbox: timed out after {call.timeout:g}s; killed {killed} process(es) it started]"


class ShellCall:
    def __init__(self, rid, capture, timeout, notes, oom_before):
        self.rid = rid
        self.capture = capture
        self.timeout = timeout
        self.started = time.time()
        self.deadline = self.started + timeout
        self.start_tick = now_tick()
        self.oom_before = oom_before
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
        self.proc = None  # type: spawn.Child | None
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
        self.proc = spawn.start(
            ["bash", "--noprofile", "--norc"],
            dict(os.environ, **{SHELL_MARK_NAME: "1"}),
            stdin=spawn.PIPE,
            stdout=out_w,
            stderr=out_w,
            pass_fds=(cmd_r,),
            before_exec=lambda: prepare_shell(self.guest.memory),
        )
        os.close(out_w)
        if self.script is None:
            os.close(cmd_r)
        self.out_r, self.out_open, self.pending = out_r, True, b""
        os.set_blocking(out_r, False)
        self.guest.descriptors.register(out_r, READ, self.on_output)
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
            self.source_lines(cmd_r)
        else:  # no memfd (python < 3.8): the command through a pipe, read to its NUL
            reader = f"__orsbox_r() {{ IFS= read -r -d '' __orsbox_c <&{cmd_r}; }}"
            os.write(self.stdin_pipe().fileno(), f"{reader}; {printer}\n".encode())
            line = f'__orsbox_r;eval "$__orsbox_c" </dev/null {cmd_r}<&-;__orsbox_p $?\n'
            self.line = line.encode()
        self.children = open_children_file(self.proc.pid)

    def source_lines(self, cmd_r):
        """The per-call line and the memfd's script, for a command memfd at `cmd_r`."""
        self.line = f". /dev/fd/{cmd_r};__orsbox_p $?\n".encode()
        self.eval = f'eval "$__orsbox_c" </dev/null {cmd_r}<&-\n'.encode()

    # -- across the guest's sleep (`sleep.py`)

    def idle(self):
        """Nothing the guest holds for the shell but its descriptors: no partial
        sentinel, no output kept between calls; and the command memfd (the pipe's
        fallback, python < 3.8, is not handed over)."""
        return (
            self.out_open
            and not self.pending
            and not self.between.total
            and self.script is not None
        )

    def descriptors(self):
        """What the guest that wakes takes over: bash's stdin, its output, the command
        memfd and the children file."""
        if self.proc is None:
            return []
        fds = [self.stdin_pipe().fileno(), self.out_r, self.cmd_w]
        return fds if self.children is None else [*fds, self.children]

    def export(self):
        stdin, out, script = self.descriptors()[:3]
        children = self.children
        return {"pid": self.running().pid, "stdin": stdin, "out": out, "script": script,
                "children": children, "token": self.token}  # fmt: skip

    def adopt(self, state):
        """Take up the shell a sleeping guest left (`export`): same bash, same state."""
        self.token = state["token"]
        self.sentinel = b"\0" + self.token.encode() + b":"
        self.script = self.cmd_w = state["script"]
        stdin = os.fdopen(state["stdin"], "wb", buffering=0)
        self.proc = spawn.Child(state["pid"], stdin, None)
        self.out_r, self.out_open, self.pending = state["out"], True, b""
        self.children = state["children"]
        for fd in self.descriptors():
            os.set_inheritable(fd, False)
        os.set_blocking(self.out_r, False)
        self.guest.descriptors.register(self.out_r, READ, self.on_output)
        self.source_lines(self.script)

    def adopt_call(self, call, output, jobs):
        """Take up a call the native sleeper began and handed over (`sleep.handed_off`):
        its request's values, when and at which clock tick it began, the OOM count and
        the shell's children then, and the shell's output since, scanned as if read
        here. Its deadline, kill sweeps and reply are this guest's from here on."""
        oom_before = call["oom_before"] if call["oom_before"] >= 0 else None
        timeout = float(call["timeout"])
        adopted = ShellCall(call["id"], Capture(call["cap"]), timeout, [], oom_before)
        adopted.started = call["started"]
        adopted.deadline = adopted.started + timeout
        adopted.start_tick = call["start_tick"]
        adopted.earlier_jobs = set(int(pid) for pid in jobs.split())
        self.call = adopted
        if output:
            self.scan(output)

    def forget(self):
        """Close our ends of a shell that is dead (or about to be)."""
        self.close_output()
        os.close(self.cmd_w)
        if self.children is not None:
            os.close(self.children)
        with suppress(OSError):
            self.stdin_pipe().close()
        self.proc = None

    def running(self):
        # type: () -> spawn.Child
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
            self.guest.descriptors.unregister(self.out_r)
            os.close(self.out_r)
            self.out_open = False

    def kill(self, call=None, spare=frozenset()):
        """Kill bash and everything it started: its descendants, its process group, and
        what left both (a double fork that called setsid is neither in the group nor, once
        its parent is gone, a descendant): `escaped_from_shell` finds those by the mark
        in their environment and, given the running `call`, `timeout_victims` by when
        they started. `spare`: pids left running (a grader's kept services); the group is
        then not stopped as a whole, since they may be in it."""
        proc = self.running()
        pid = proc.pid
        hold = None  # its group stopped before each pass, as in `sweep` (all of it dies)
        if proc.returncode is None:  # a reaped pid could be someone else's
            with suppress(OSError):
                os.kill(pid, signal.SIGKILL)  # first: a dead shell starts nothing more
            hold = None if spare else self.hold_group  # (unreaped until the sweeps are done)

        def timed_out(table):
            return [p for p in self.timeout_victims(table, call) if p not in spare]

        if call is not None:  # counted in the call's note, waited for before its reply
            kill_sweep(timed_out, call.killed, hold)

        def victims(table):
            out = [p for p in table if table[p][4] == pid or ancestry_root(p, table, {pid}) == pid]
            out += escaped_from_shell(table)
            out = out + timed_out(table) if call is not None else out
            return [p for p in out if p not in spare] if spare else out

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
        self.call = ShellCall(rid, capture, timeout, notes, self.guest.memory.oom_count())
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
                with suppress(OSError):
                    os.killpg(shell, signal.SIGCONT)

    def hold_group(self):
        """SIGSTOP the shell's process group (the shell, what it runs, its earlier
        background jobs; `sweep` continues them all after)."""
        with suppress(OSError):
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
