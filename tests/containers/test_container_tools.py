"""Standard tools in real containers, driven through the ORS server over HTTP + SSE."""

from __future__ import annotations

import base64
import os
import time

import httpx

from orsbox.authoring.standard_tools import SOURCE_MAX_CHARS
from tests.containers.conftest import Episode, open_episode
from tests.servers import LiveServer


def server_rss_kib(server: LiveServer) -> int:
    with open(f"/proc/{server.process.pid}/status") as f:
        status = f.read()
    return int(next(line.split()[1] for line in status.splitlines() if line.startswith("VmRSS")))


def test_tool_lists_are_opt_in(container_server: LiveServer) -> None:
    def names(env: str) -> list[str]:
        return [t["name"] for t in httpx.get(f"{container_server.url}/{env}/tools").json()["tools"]]

    assert names("sandboxed") == [
        "bash",
        "edit_file",
        "list_dir",
        "python",
        "read_file",
        "submit",
        "write_file",
    ]
    assert names("onlybash") == ["bash"]
    spec = next(t for t in httpx.get(f"{container_server.url}/onlybash/tools").json()["tools"])
    assert spec["input_schema"]["required"] == ["command"]
    assert "persistent bash shell" in spec["description"]


def test_shell_state_persists(episode: Episode) -> None:
    episode.bash("export X=1; cd /tmp; f() { echo fn-$1; }; declare -a arr=(a b c)")
    text, meta = episode.bash("echo $X; pwd; f ok; echo ${arr[2]}")
    assert text == "1\n/tmp\nfn-ok\nc\n"
    assert meta["exit_code"] == 0


def test_exit_codes_and_interleaving(episode: Episode) -> None:
    text, meta = episode.bash(
        "echo out; echo err >&2; echo out2; exit_code() { return 3; }; exit_code"
    )
    assert text == "out\nerr\nout2\n[exit code 3]"
    assert meta["exit_code"] == 3 and meta["timed_out"] is False


def test_sessions_are_isolated(container_server: LiveServer) -> None:
    first, second = open_episode(container_server), open_episode(container_server)
    try:
        first.bash("echo secret > /workspace/mine.txt")
        text, meta = second.bash("cat /workspace/mine.txt")
        assert meta["exit_code"] == 1 and "No such file" in text
    finally:
        first.delete()
        second.delete()


def test_timeout_kills_the_whole_tree_and_the_shell_survives(episode: Episode) -> None:
    started = time.monotonic()
    command = "bash -c 'trap \"\" TERM; sleep 301' & sleep 300"
    text, meta = episode.bash(command, timeout=2)
    # at its 2 s timeout, not after the 300 s sleep (a loaded CI machine adds seconds)
    assert time.monotonic() - started < 20
    assert meta["timed_out"] is True and meta["exit_code"] is None
    assert "timed out after 2s" in text
    left, _ = episode.bash("ps -eo args | grep -c '[s]leep 30' || true")
    # like a terminal, bash may first report the killed job ("... Killed  bash -c ...")
    assert left.splitlines()[-1] == "0"
    assert episode.bash("echo still here")[0] == "still here\n"


def test_background_job_returns_at_once(episode: Episode) -> None:
    started = time.monotonic()
    episode.bash("sleep 100 &")
    assert time.monotonic() - started < 20  # at once, not after the job's 100 s
    text, _ = episode.bash("jobs -l | grep -c 'sleep 100'")
    assert text.strip() == "1"


def test_output_floods_are_capped_and_server_memory_stays_bounded(episode: Episode) -> None:
    rss_before = server_rss_kib(episode.server)
    text, meta = episode.bash("timeout 5 yes", timeout=20)
    assert meta["truncated"] is True and meta["output_bytes"] > 10 * 1024 * 1024
    assert 60_000 < len(text.encode()) < 70_000
    assert "bytes" in text  # the marker says how much was cut
    text, meta = episode.bash("head -c 100000000 /dev/zero | tr '\\0' a", timeout=60)
    assert meta["truncated"] is True and meta["output_bytes"] == 100_000_000
    assert text.startswith("aaaa") and len(text.encode()) < 70_000
    growth_mib = (server_rss_kib(episode.server) - rss_before) / 1024
    assert growth_mib < 64, f"server RSS grew {growth_mib:.1f} MiB"


def test_per_call_output_cap(episode: Episode) -> None:
    text, meta = episode.bash("seq 1 100000", max_output_bytes=1000)
    assert meta["truncated"] is True and len(text.encode()) < 1200
    assert text.startswith("1\n2\n") and text.rstrip().endswith("100000")


def test_binary_and_invalid_utf8_output(episode: Episode) -> None:
    text, meta = episode.bash("printf 'ok \\xff\\xfe \\x00 end'; head -c 3000 /dev/urandom")
    assert meta["exit_code"] == 0 and text.startswith("ok \ufffd\ufffd")


def test_fork_bomb_is_contained(episode: Episode) -> None:
    _, meta = episode.bash(":(){ :|:& };:; sleep 5", timeout=4)
    assert meta["timed_out"] is True  # the pids limit held it; the timeout ended it
    assert episode.bash("echo ok")[0] == "ok\n"
    count, _ = episode.bash("ps -e --no-headers | wc -l")
    assert int(count) < 20  # no bomb processes left behind


def test_memory_bomb_is_reported_out_of_memory(episode: Episode) -> None:
    out = episode.ok("python", code="x = []\nwhile True: x.append(bytearray(16 * 1024**2))")
    assert out["metadata"]["oom_killed"] is True
    assert "out of memory" in out["blocks"][0]["text"]
    text, meta = episode.bash("a=x; while :; do a=$a$a; done", timeout=30)
    assert meta["oom_killed"] is True or "out of memory" in text
    assert episode.bash("echo alive")[0] == "alive\n"


def test_no_network_but_loopback(episode: Episode) -> None:
    text, _ = episode.bash("ls /sys/class/net")
    assert text.split() == ["lo"]


def test_python_tool(episode: Episode) -> None:
    text = episode.text(
        "python", code="import sys\nprint(sum(range(10)))\nprint('e', file=sys.stderr)"
    )
    assert text == "45\ne\n"


def test_file_tools_round_trip(episode: Episode) -> None:
    path = "/workspace/dir with spaces/sub/file name.txt"
    assert "wrote 12 bytes" in episode.text("write_file", path=path, content="hello\nworld\n")
    assert episode.text("read_file", path=path) == "hello\nworld\n"
    assert episode.text("read_file", path=path, offset=2, limit=1).startswith(
        "world\n[lines 2-2 of 2"
    )
    assert episode.text("edit_file", path=path, old_string="world", new_string="there") == (
        f"edited {path} at line 2"
    )
    assert episode.text("read_file", path=path) == "hello\nthere\n"
    listing = episode.text("list_dir", path="/workspace/dir with spaces/sub")
    assert "file name.txt" in listing

    blob = os.urandom(5000) + b"\0\xff"
    encoded = base64.b64encode(blob).decode()
    episode.text("write_file", path="/workspace/blob.bin", content=encoded, encoding="base64")
    assert (
        base64.b64decode(episode.text("read_file", path="/workspace/blob.bin", encoding="base64"))
        == blob
    )
    sha, _ = episode.bash("sha256sum '/workspace/blob.bin' | cut -d' ' -f1")
    import hashlib

    assert sha.strip() == hashlib.sha256(blob).hexdigest()


def test_edit_keeps_permissions(episode: Episode) -> None:
    episode.bash(
        "printf '#!/bin/sh\\necho one\\n' > /workspace/run.sh && chmod 755 /workspace/run.sh"
    )
    episode.text("edit_file", path="/workspace/run.sh", old_string="one", new_string="two")
    assert episode.bash("/workspace/run.sh")[0] == "two\n"


def test_file_tool_errors_are_readable(episode: Episode) -> None:
    def error(name: str, **tool_input: object) -> str:
        result = episode.call(name, **tool_input).result()
        assert result["ok"] is False, result
        return result["error"]

    assert "no such file" in error("read_file", path="/workspace/nope.txt").lower()
    assert "directory" in error("read_file", path="/workspace").lower()
    assert "permission denied" in error("read_file", path="/etc/shadow").lower()
    episode.bash("head -c 100 /dev/urandom > /workspace/bin.dat; printf 'a a a' > /workspace/a.txt")
    assert "binary" in error("read_file", path="/workspace/bin.dat") or "UTF-8" in error(
        "read_file", path="/workspace/bin.dat"
    )
    assert "occurs 3 times" in error(
        "edit_file", path="/workspace/a.txt", old_string="a", new_string="b"
    )
    assert "not found" in error(
        "edit_file", path="/workspace/a.txt", old_string="zzz", new_string="b"
    )
    assert "no such file" in error("list_dir", path="/nowhere").lower()
    assert "permission denied" in error("write_file", path="/etc/passwd", content="x").lower()
    assert "invalid input" in error("bash")
    too_long = error("python", code="#" * (SOURCE_MAX_CHARS + 1))
    assert f"code: String should have at most {SOURCE_MAX_CHARS} characters" in too_long
    assert episode.bash("echo still fine")[0] == "still fine\n"


def test_grader_runs_in_the_container(container_server: LiveServer) -> None:
    for content, reward in (("hello", 1.0), ("nope", 0.0)):
        ep = open_episode(container_server)
        try:
            ep.text("write_file", path="/workspace/out.txt", content=content)
            out = ep.ok("submit")
            assert (out["reward"], out["finished"]) == (reward, True)
        finally:
            ep.delete()


def test_restart_gives_a_fresh_shell(episode: Episode) -> None:
    episode.bash("export GONE=1; cd /tmp")
    assert episode.text("bash", command="", restart=True) == "[shell restarted]"
    assert episode.bash("echo ${GONE:-unset}; pwd")[0] == "unset\n/workspace\n"


def test_task_files_are_copied_in_at_setup(episode: Episode) -> None:
    assert episode.text("read_file", path="/workspace/task/sub/given.txt") == "from the host\n"
