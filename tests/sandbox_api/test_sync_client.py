"""The `openreward` client's own `SandboxesAPI`, unmodified, against orsbox: one test per
endpoint it calls, plus the behaviours the issue names (timeouts that kill a process
tree, output over the cap, non-UTF-8 bytes, byte-exact files of 0 B, 1 B and 50 MB)."""

from __future__ import annotations

import base64
import hashlib
import os
import subprocess
import sys
from pathlib import Path

import aiohttp
import docker
import httpx
import pytest
from openreward import OpenReward

from tests.sandbox_api.conftest import TOKEN_A, sandbox_settings
from tests.servers import ROOT, LiveServer
from tests.sse_client import post_sse


def containers_of(docker_client: docker.DockerClient, sid: str) -> list[dict]:
    found = docker_client.api.containers(filters={"label": f"orsbox.session={sid}"})
    return [docker_client.api.inspect_container(c["Id"]) for c in found]


def test_create_run_and_stop(
    client: OpenReward, base_image: str, docker_client: docker.DockerClient
) -> None:
    settings = sandbox_settings(base_image, env={"GREETING": "hi there"}, machine_size="0.5:2")
    with client.sandbox(settings) as box:
        assert box.sid and box.sid.startswith("sbx-")
        output, code = box.run("echo $GREETING; echo err >&2; exit 3")
        assert (output, code) == ("hi there\nerr", 3)
        [container] = containers_of(docker_client, box.sid)
        host = container["HostConfig"]
        assert (host["NanoCpus"], host["Memory"]) == (500_000_000, 2 * 1024**3)
        assert host["NetworkMode"] == "none" and host["CapDrop"] == ["ALL"]
        argv = [sys.executable, "-m", "orsbox.cli.main", "ps"]
        wide = {**os.environ, "COLUMNS": "300"}
        ps = subprocess.run(argv, capture_output=True, text=True, check=True, cwd=ROOT, env=wide)
        listing = ps.stdout
        # the environment as a Kubernetes label value (`orsbox.sandbox.labels`)
        assert "sandbox_orsbox_tests" in listing and box.sid[:16] in listing
        sid = box.sid
    assert containers_of(docker_client, sid) == []  # stop removed it


def test_timeout_kills_the_process_tree(client: OpenReward, base_image: str) -> None:
    with client.sandbox(sandbox_settings(base_image)) as box:
        result = box.run("(sleep 300 &) ; setsid sleep 301 & sleep 302", timeout=2)
        assert result.timed_out and result.return_code == 124
        left = box.run("pgrep -f 'sleep 30[012]' || echo none")
        assert left.output == "none"


def test_output_over_the_cap_is_cut_to_its_head(client: OpenReward, base_image: str) -> None:
    with client.sandbox(sandbox_settings(base_image)) as box:
        result = box.run("seq 1 200000", max_bytes=1000)
        assert result.truncated and len(result.output) == 1000
        assert result.output.startswith("1\n2\n3\n")
        whole = box.run("seq 1 2000", max_bytes=None)
        assert not whole.truncated and whole.output.endswith("1999\n2000")


def test_non_utf8_bytes_arrive_exactly(client: OpenReward, base_image: str) -> None:
    with client.sandbox(sandbox_settings(base_image)) as box:
        result = box.run(r"printf 'a\xff\xfeb\x00c'", sanitise=False)
        raw = result.output.encode("utf-8", "surrogateescape")
        assert raw == b"a\xff\xfeb\x00c"


@pytest.mark.parametrize("size", [0, 1, 50 * 1024 * 1024])
def test_upload_and_download_byte_exact(
    client: OpenReward, base_image: str, tmp_path: Path, size: int
) -> None:
    data = os.urandom(size)
    local = tmp_path / "in.bin"
    local.write_bytes(data)
    with client.sandbox(sandbox_settings(base_image, machine_size="1:2")) as box:
        sent = box.upload_from(local, "/tmp/deep/dir/file.bin")
        assert sent.size == size and sent.sha256 == hashlib.sha256(data).hexdigest()
        stat = box.stat_file("/tmp/deep/dir/file.bin", sha256=True)
        assert stat == {"size": size, "sha256": hashlib.sha256(data).hexdigest()}
        back = tmp_path / "out.bin"
        got = box.download_to("/tmp/deep/dir/file.bin", back)
        assert got.sha256 == sent.sha256 and back.read_bytes() == data
        if size <= 1024 * 1024:
            assert box.download("/tmp/deep/dir/file.bin") == data


def test_small_upload_and_download(client: OpenReward, base_image: str, tmp_path: Path) -> None:
    local = tmp_path / "note.txt"
    local.write_bytes(b"one\ntwo\n")
    with client.sandbox(sandbox_settings(base_image)) as box:
        box.upload(local, "/tmp/note.txt")  # through /run and base64, as the client does
        assert box.download("/tmp/note.txt") == b"one\ntwo\n"


def test_stat_file_refuses_what_is_not_a_regular_file(client: OpenReward, base_image: str) -> None:
    with client.sandbox(sandbox_settings(base_image)) as box:
        box.check_run("ln -s /etc/hostname /tmp/link")
        with pytest.raises(aiohttp.ClientResponseError) as link:
            box.stat_file("/tmp/link")
        assert link.value.status == 400 and "symlink" in link.value.message
        with pytest.raises(aiohttp.ClientResponseError) as folder:
            box.stat_file("/tmp")
        assert folder.value.status == 400
        with pytest.raises(aiohttp.ClientResponseError) as missing:
            box.stat_file("/tmp/nothing-here")
        assert missing.value.status == 404


def test_run_resumes_by_task_id(
    client: OpenReward, base_image: str, api_server: LiveServer
) -> None:
    """A client that lost the stream re-posts with the `task_id`: the command is not run
    again, and its result arrives (the openreward client does this on a disconnect)."""
    with client.sandbox(sandbox_settings(base_image)) as box:
        headers = {"X-Session-ID": box.sid or "", "X-API-Key": TOKEN_A}
        body = {"cmd": "sleep 1; echo run >> /tmp/runs; cat /tmp/runs", "max_bytes": 100}
        with httpx.stream("POST", f"{api_server.url}/run", json=body, headers=headers) as first:
            line = next(line for line in first.iter_lines() if line.startswith("data: "))
            task_id = line[len("data: ") :]  # and the connection is dropped here
        again = post_sse(
            f"{api_server.url}/run",
            {**body, "task_id": task_id},
            box.sid or "",
            **{"X-API-Key": TOKEN_A},
        )
        answer = again.result()
        assert base64.b64decode(answer["output"]) == b"run\n"
        assert (answer["return_code"], answer["timed_out"]) == (0, False)
