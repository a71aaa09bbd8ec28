"""Commands started with fork and exec, the part of `subprocess.Popen` the guest uses.

Why not `subprocess`: importing it (with `threading`, `warnings` and `locale`, which it
brings) costs the guest 0.8 MiB of memory, measured in python 3.11, for the sandbox's
whole life: a tenth of an idle episode's cost, a thousand at once on one host
(docs/operating/sizing.md). What the guest needs is small: pipes, an environment, a
working directory, a new session, descriptors passed on, a function run before exec,
and a failed exec raised in the parent as `Popen` raises it (`FileNotFoundError`
naming the command, which `serve.start_exec` answers as "command not found").

As `Popen` does, the child closes every descriptor but 0-2 and the ones passed on, and
gets SIGPIPE's default action back (the guest ignores it; an ignored signal stays
ignored across exec, and `yes | head` would then never end).
"""

import os
from _signal import SIG_DFL, SIGPIPE, SIGXFSZ
from _signal import signal as set_handler

from .quiet import suppress

PIPE = -1
STDOUT = -2
DEVNULL = -3


class Child:
    """A started command: its pid, the guest's ends of the pipes asked for (unbuffered
    binary files), and, once reaped, its status as `Popen.returncode` gives it
    (negative: the signal that ended it)."""

    def __init__(self, pid, stdin, stdout):
        self.pid = pid
        self.stdin = stdin
        self.stdout = stdout
        self.returncode = None

    def poll(self):
        """The return code if the child has ended (reaping it), else None."""
        if self.returncode is None:
            try:
                pid, status = os.waitpid(self.pid, os.WNOHANG)
            except ChildProcessError:  # reaped elsewhere: as Popen, count it as ended
                self.returncode = 0
                return 0
            if pid == self.pid:
                self.returncode = returncode_of(status)
        return self.returncode

    def wait(self):
        """Wait for the child to end; its return code."""
        while self.returncode is None:
            try:
                _, status = os.waitpid(self.pid, 0)
            except ChildProcessError:
                self.returncode = 0
            else:
                self.returncode = returncode_of(status)
        return self.returncode


def returncode_of(status):
    return -os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def start(argv, env, stdin=None, stdout=None, stderr=None, cwd=None, pass_fds=(),
          new_session=False, before_exec=None):  # fmt: skip
    """Start `argv` (looked up on `env`'s PATH). `stdin`, `stdout`: PIPE, DEVNULL, a
    descriptor (left open here) or None (the guest's own); `stderr` also STDOUT."""
    ends = {}  # type: dict[int, int]  # the guest's end of each pipe: 0 stdin, 1 stdout
    ours = []  # type: list[int]  # made for the child: closed here once it has forked
    err = []  # type: list[int]  # closes on exec: the child's end closes when exec works
    try:
        chosen = child_descriptors(stdin, stdout, stderr, ends, ours)
        err += os.pipe()
        pid = os.fork()
        if pid == 0:
            run_child(argv, env, chosen, cwd, pass_fds, new_session, before_exec, err[1])
    except BaseException:
        for fd in list(ends.values()) + ours + err:
            os.close(fd)
        raise
    err_r, err_w = err
    os.close(err_w)
    for fd in ours:
        os.close(fd)
    failure = read_all(err_r)
    if failure:
        for fd in ends.values():
            os.close(fd)
        os.waitpid(pid, 0)
        raise start_error(failure, argv, cwd)
    return Child(
        pid,
        os.fdopen(ends[0], "wb", buffering=0) if 0 in ends else None,
        os.fdopen(ends[1], "rb", buffering=0) if 1 in ends else None,
    )


def child_descriptors(stdin, stdout, stderr, ends, ours):
    """What becomes the child's 0, 1 and 2 (None: the guest's own). Each descriptor made
    goes to `ours` and the guest's ends of pipes to `ends`, as soon as it exists."""
    chosen = [stdin, stdout, None]
    if stdin == PIPE:
        pipe = os.pipe()
        ends[0], chosen[0] = pipe[1], pipe[0]
        ours.append(pipe[0])
    elif stdin == DEVNULL:
        chosen[0] = os.open(os.devnull, os.O_RDONLY)
        ours.append(chosen[0])
    if stdout == PIPE:
        pipe = os.pipe()
        ends[1], chosen[1] = pipe
        ours.append(pipe[1])
    chosen[2] = chosen[1] if stderr == STDOUT else stderr
    return chosen


def run_child(argv, env, chosen, cwd, pass_fds, new_session, before_exec, err_w):
    """In the forked child: never returns. What fails is written to `err_w` as
    "errno:step" for the guest to raise."""
    step = "start"
    try:
        if new_session:
            os.setsid()
        for target, fd in enumerate(chosen):
            if fd is not None:
                os.dup2(fd, target)  # dup2 leaves the copy inheritable
        close_all_but(set(pass_fds) | {err_w})
        for fd in pass_fds:
            os.set_inheritable(fd, True)
        set_handler(SIGPIPE, SIG_DFL)
        set_handler(SIGXFSZ, SIG_DFL)
        if cwd:
            step = "cwd"
            os.chdir(cwd)
        step = "before_exec"
        if before_exec is not None:
            before_exec()
        step = "exec"
        os.execvpe(argv[0], argv, env)
    except BaseException as e:
        code = getattr(e, "errno", None) or 0
        try:
            os.write(err_w, b"%d:%s" % (code, step.encode()))
        finally:
            os._exit(255)


def close_all_but(keep):
    """Close every descriptor above 2 not in `keep`, as listed in /proc/self/fd (a loop
    to the descriptor limit would be a million closes under Docker's default)."""
    try:
        fds = [int(name) for name in os.listdir("/proc/self/fd")]
    except OSError:
        return  # no /proc: what the guest opened closes on exec all the same (PEP 446)
    for fd in fds:
        if fd > 2 and fd not in keep:
            with suppress(OSError):  # the listing's own, closed already
                os.close(fd)


def read_all(fd):
    data = b""
    try:
        while True:
            chunk = os.read(fd, 256)
            if not chunk:
                return data
            data += chunk
    finally:
        os.close(fd)


def start_error(failure, argv, cwd):
    """The OSError `Popen` would raise (errno picks the subclass: ENOENT is
    FileNotFoundError), naming the command, or the directory when that failed."""
    code, _, step = failure.decode().partition(":")
    errno_ = int(code) or 5  # EIO: `before_exec` failed without an errno
    message = os.strerror(errno_)
    if step in ("exec", "cwd"):
        return OSError(errno_, message, cwd if step == "cwd" else argv[0])
    return OSError(errno_, f"{message} (in the child, at {step})")
