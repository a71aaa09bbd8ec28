"""How the guest starts commands (`guest/inside/spawn.py`, fork and exec in place of
`subprocess.Popen`), on this host's processes: what a command inherits, and what a
failed start raises, must be what `Popen` gives. The conformance suite runs the same
through every backend (test_exec_files.py)."""

from __future__ import annotations

import os
import signal

import pytest

from orsbox.sandbox.guest.inside import spawn

PATH_ENV = {"PATH": os.environ.get("PATH", os.defpath)}


def output_of(child: spawn.Child) -> bytes:
    assert child.stdout is not None
    data = child.stdout.read()
    child.stdout.close()
    child.wait()
    return data


def test_pipes_environment_directory_and_exit_status(tmp_path: object) -> None:
    child = spawn.start(
        ["sh", "-c", 'cat; echo "$X" $(pwd); echo err >&2; exit 3'],
        {**PATH_ENV, "X": "x"},
        stdin=spawn.PIPE, stdout=spawn.PIPE, stderr=spawn.STDOUT, cwd=str(tmp_path),
    )  # fmt: skip
    assert child.stdin is not None
    child.stdin.write(b"in\n")
    child.stdin.close()
    assert output_of(child) == f"in\nx {tmp_path}\nerr\n".encode()
    assert child.returncode == 3 and child.poll() == 3


def test_a_signal_gives_a_negative_return_code_and_poll_does_not_wait() -> None:
    child = spawn.start(["sleep", "60"], PATH_ENV, stdin=spawn.DEVNULL, new_session=True)
    assert child.poll() is None
    assert os.getsid(child.pid) == child.pid  # a session of its own
    os.kill(child.pid, signal.SIGKILL)
    assert child.wait() == -signal.SIGKILL


def test_inherited_signals_are_reset_and_only_passed_descriptors_stay() -> None:
    """The parent ignores SIGPIPE and SIGXFSZ (python does at start); the command gets
    their default back. An inheritable descriptor not passed on is closed in it."""
    assert signal.getsignal(signal.SIGPIPE) == signal.SIG_IGN
    leaked = os.open(os.devnull, os.O_RDONLY)
    passed = os.open(os.devnull, os.O_RDONLY)
    os.set_inheritable(leaked, True)
    try:
        child = spawn.start(
            ["sh", "-c", "grep SigIgn /proc/self/status; ls /proc/self/fd"],
            PATH_ENV, stdout=spawn.PIPE, pass_fds=(passed,),
        )  # fmt: skip
        lines = output_of(child).decode().split()
    finally:
        os.close(leaked)
        os.close(passed)
    ignored = int(lines[1], 16)
    assert ignored & (1 << (signal.SIGPIPE - 1)) == 0
    assert ignored & (1 << (signal.SIGXFSZ - 1)) == 0
    fds = set(lines[2:])
    assert str(passed) in fds and str(leaked) not in fds


def test_a_failed_start_raises_as_popen_does_and_leaves_no_child(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    forked: list[int] = []
    fork = os.fork

    def counted_fork() -> int:
        pid = fork()
        if pid:
            forked.append(pid)
        return pid

    monkeypatch.setattr(os, "fork", counted_fork)
    with pytest.raises(FileNotFoundError) as missing:
        spawn.start(["no-such-program-here"], PATH_ENV, stdout=spawn.PIPE)
    assert missing.value.filename == "no-such-program-here"
    with pytest.raises(FileNotFoundError) as no_folder:
        spawn.start(["true"], PATH_ENV, cwd="/no/such/folder")
    assert no_folder.value.filename == "/no/such/folder"

    def refuse() -> None:
        raise PermissionError(13, "refused")

    with pytest.raises(PermissionError, match="before_exec"):
        spawn.start(["true"], PATH_ENV, before_exec=refuse)
    assert len(forked) == 3
    for pid in forked:  # every failed child was reaped
        with pytest.raises(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
