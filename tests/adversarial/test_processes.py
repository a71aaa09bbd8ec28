"""Hostile processes through the server: each call still ends on time, the shell stays
usable, and nothing the command started lingers (no spinner, no sleeper, no zombie).

The fork bomb, memory bomb, SIGTERM-ignoring child and double-forked escapees have
their tests in tests/containers/test_container_tools.py and tests/sandbox/test_shell.py
(see tests/adversarial/__init__.py)."""

from __future__ import annotations

import time

import pytest

from tests.containers.conftest import Episode
from tests.waiting import wait_until

pytestmark = pytest.mark.docker

PYTHON_SPIN = "while True: pass"


def sandbox_itself(args: str) -> bool:
    """Init, the guest (the container's command), the shell (and our `ps`)."""
    own = ("/sbin/docker-init", "bash --noprofile", "ps -eo")
    return args.startswith(own) or "orsbox-guest" in args


def strays(ep: Episode) -> list[str]:
    """Every process in the sandbox but its own (init, its command, guest, shell)."""
    text, _ = ep.bash("ps -eo args=")
    lines = [line.strip() for line in text.splitlines()]
    return [p for p in lines if p and not sandbox_itself(p)]


def timed_call(ep: Episode, tool: str, **tool_input: object) -> tuple[str, dict, float]:
    started = time.monotonic()
    out = ep.ok(tool, **tool_input)
    return out["blocks"][0]["text"], out["metadata"], time.monotonic() - started


@pytest.mark.parametrize(
    ("tool", "tool_input"),
    [
        ("bash", {"command": "while :; do :; done"}),  # the persistent shell itself spins
        ("bash", {"command": "python3 -c 'while True: pass'"}),
        ("python", {"code": PYTHON_SPIN}),
        ("bash", {"command": "sleep 1e9"}),
        ("python", {"code": "import time; time.sleep(1e9)"}),
    ],
)
def test_spinners_and_sleepers_end_at_their_timeout(
    hostile: Episode, tool: str, tool_input: dict
) -> None:
    text, meta, took = timed_call(hostile, tool, timeout=2, **tool_input)
    assert meta["timed_out"] is True and meta["exit_code"] is None, text
    assert "timed out after 2s" in text and took < 6
    assert hostile.bash("echo still here")[0].endswith("still here\n")
    assert strays(hostile) == []


def test_orphans_never_hold_a_call_and_die_with_their_shell(hostile: Episode) -> None:
    started = time.monotonic()
    hostile.bash(  # four ways to leave a process behind, stdout still open in two
        "setsid sleep 1001 & (sleep 1002 &); nohup sleep 1003 >/dev/null 2>&1 & disown;"
        "python3 -c 'import os, time\nif os.fork() == 0:\n os.setsid()\n"
        " if os.fork() == 0: time.sleep(1004)'"
    )
    assert time.monotonic() - started < 20  # not held by the 1000 s sleepers (load adds seconds)
    wait_until(  # a forked job is listed as the shell it came from until it has exec'd
        lambda: len(strays(hostile)) == 4, 10, interval_s=0.1, message="four strays listed"
    )
    assert hostile.text("bash", command="", restart=True) == "[shell restarted]"
    assert strays(hostile) == []


def test_a_thousand_short_lived_children_leave_no_zombie(hostile: Episode) -> None:
    text, meta = hostile.bash(
        # orphans whose parent exits at once, then a parent that never reaps its own
        "for i in $(seq 1000); do sh -c 'true & exit 0'; done;"
        "python3 -c 'import os\nfor _ in range(200):\n if os.fork() == 0: os._exit(0)';"
        "echo forked",
        timeout=60,
    )
    assert meta["exit_code"] == 0 and text.endswith("forked\n"), text
    wait_until(  # init reaps what it inherits, a moment later
        lambda: hostile.bash("ps -eo stat= | grep -c '^Z' || true")[0].strip() == "0",
        5,
        interval_s=0.2,
        message="no zombie left",
    )
    assert "<defunct>" not in hostile.bash("ps -ef")[0]


def test_a_forged_sentinel_cannot_crash_the_guest(hostile: Episode) -> None:
    """The shell marks a command's end with a random token a command can read; printing
    one with garbage for a status must not take the sandbox down. (Its output may then
    be one call late: the command lied about where its output ended.)"""
    token = "$(declare -f __orsbox_p | sed -n 's/.*000\\([0-9a-f]*\\):.*/\\1/p')"
    hostile.call("bash", command=f"printf '\\000%s:garbage\\000' {token}; sleep 0.2")
    texts = [hostile.bash("echo alive")[0] for _ in range(2)]  # an error event fails here
    assert "alive" in "".join(texts)
