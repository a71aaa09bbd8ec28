"""`/run` takes commands of any size the openreward client sends: its `upload()` sends
a file as one base64 command (up to 10 MB of file), far past Linux's 128 KiB cap on one
argument, so long commands reach the shell on stdin (`RunRequest.command`)."""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

import pytest
from openreward import AsyncOpenReward

from orsbox.server.sandbox_api.request import ARGV_COMMAND_MAX_BYTES, RunRequest
from tests.sandbox_api.conftest import TOKEN_A, sandbox_settings

pytestmark = pytest.mark.anyio
MB = 1024 * 1024


@pytest.mark.parametrize("size", [0, 100_000, MB, 10 * MB], ids=["0B", "100KB", "1MB", "10MB"])
async def test_upload_through_the_clients_upload(
    session_url: str, base_image: str, tmp_path: Path, size: int
) -> None:
    data = os.urandom(size)
    (tmp_path / "in.bin").write_bytes(data)
    async with AsyncOpenReward(api_key=TOKEN_A).sandbox(sandbox_settings(base_image)) as box:
        await box.upload(tmp_path / "in.bin", "/tmp/in.bin")
        stat = await box.stat_file("/tmp/in.bin", sha256=True)
    assert stat == {"size": size, "sha256": hashlib.sha256(data).hexdigest()}


async def test_a_long_command_runs_as_a_short_one_does(session_url: str, base_image: str) -> None:
    """Top level (`exit`, `$0`), stdin at its end, exit code and output: as through `-c`."""
    padding = "#" * (ARGV_COMMAND_MAX_BYTES + 1)
    script = 'read -r line; echo "read=$? line=$line zero=$0"; f() { return 7; }; f; exit $?'
    async with AsyncOpenReward(api_key=TOKEN_A).sandbox(sandbox_settings(base_image)) as box:
        short = await box.run(script)
        long = await box.run(f"{script}\n{padding}")
    assert long.output == short.output == "read=1 line= zero=/bin/bash"
    assert long.return_code == short.return_code == 7


def test_only_long_commands_go_on_stdin() -> None:
    short = RunRequest(cmd="echo hi", shell="/bin/sh")
    assert short.command() == (["/bin/sh", "-c", "echo hi"], None)
    long_cmd = "echo " + "x" * ARGV_COMMAND_MAX_BYTES
    argv, stdin = RunRequest(cmd=long_cmd).command()
    assert argv[:2] == ["/bin/bash", "-c"] and long_cmd not in argv
    assert stdin == long_cmd.encode()
