"""The sleeping guest's holder (`sleep.HOLDER`) takes exactly the host's wake byte and
leaves the request's frame in the pipe for the guest it runs next: checked with the
host's bash, the holder's next program being `cat`, which prints what was left."""

from __future__ import annotations

import subprocess

import pytest

from orsbox.sandbox.guest.channel import WAKE
from orsbox.sandbox.guest.inside.sleep import HOLDER

FRAME = b'{"op":"shell","id":7}\n\xff\xfe\n\x00binary\n'  # newlines and bytes of no locale


@pytest.mark.parametrize("locale", ["C", "C.UTF-8"])
def test_the_holder_takes_the_wake_byte_and_leaves_the_frame(locale: str) -> None:
    held = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", HOLDER, "cat"],
        input=WAKE + FRAME,
        capture_output=True,
        env={"LANG": locale, "LC_ALL": locale, "PATH": "/usr/bin:/bin"},
        timeout=10,
    )
    assert (held.returncode, held.stdout, held.stderr) == (0, FRAME, b"")


def test_the_end_of_stdin_runs_the_guest_too() -> None:
    """The host gone: the guest that wakes finds the end and stops the sandbox."""
    held = subprocess.run(
        ["bash", "--noprofile", "--norc", "-c", HOLDER, "echo", "woken"],
        input=b"",
        capture_output=True,
        timeout=10,
    )
    assert held.stdout == b"woken\n"
