"""Processes a cluster started, found again by pid and start time, never by name.

A pid alone can be reused by an unrelated process once ours ends; the pid's start time
(`/proc/PID/stat`, as the sandbox labels use it) tells them apart, so `cluster down`
never signals a process it did not start.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass

from orsbox.sandbox.procfs import process_start_time


@dataclass(frozen=True)
class Tracked:
    pid: int
    started: str  # the pid's start time when we started it

    @classmethod
    def of(cls, pid: int) -> Tracked:
        return cls(pid, process_start_time(pid) or "")

    def alive(self) -> bool:
        """Still our process, and not a zombie waiting for us to collect it."""
        if self.pid <= 0:  # never started (waitpid(0) would collect any child of ours)
            return False
        _reap(self.pid)
        if process_start_time(self.pid) != self.started:
            return False
        try:
            with open(f"/proc/{self.pid}/stat", "rb") as f:
                state = f.read().rsplit(b")", 1)[1].split()[0]
        except OSError:
            return False
        return state != b"Z"

    def send(self, sig: int) -> None:
        if self.alive():
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.pid, sig)

    def stop(self, timeout_s: float, sig: int = signal.SIGTERM) -> None:
        """`sig`, wait for the end, SIGKILL past `timeout_s`."""
        for signal_now in (sig, signal.SIGKILL):
            self.send(signal_now)
            deadline = time.monotonic() + timeout_s
            while self.alive() and time.monotonic() < deadline:
                time.sleep(0.05)
            if not self.alive():
                _reap(self.pid)  # it may have turned zombie since alive() looked
                return


def _reap(pid: int) -> None:
    """Collect the exit status if `pid` is our child (else it lingers as a zombie)."""
    with contextlib.suppress(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)
