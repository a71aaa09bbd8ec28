"""Hostile output through the server: a gigabyte, terminal escapes, bytes that are not
text. The call returns, its result is well-formed JSON in well-formed SSE, and the
server holds about the output cap, not the output.

A 100 MB single line and binary/invalid UTF-8 output are tested in
tests/containers/test_container_tools.py (see tests/adversarial/__init__.py)."""

from __future__ import annotations

import json
import time

import pytest

from tests.containers.conftest import Episode
from tests.containers.test_container_tools import server_rss_kib

pytestmark = pytest.mark.docker

GIB = 1024**3
ESCAPES = "\x1b[1;31mred\x1b[0m \x1b]0;title\x07\x1b[2J\x1b[H\r\x08\x7f\x1bc\x9b6n end"


def test_a_gigabyte_of_output_returns_capped(hostile: Episode) -> None:
    rss_before = server_rss_kib(hostile.server)
    started = time.monotonic()
    text, meta = hostile.bash(f"yes | head -c {GIB}", timeout=120)
    assert time.monotonic() - started < 120
    assert meta["exit_code"] == 0 and meta["truncated"] is True
    assert meta["output_bytes"] == GIB
    assert text.startswith("y\ny\n") and text.endswith("y\ny\n")
    assert f"the output was {GIB} bytes" in text and len(text.encode()) < 70_000
    growth_mib = (server_rss_kib(hostile.server) - rss_before) / 1024
    assert growth_mib < 64, f"server RSS grew {growth_mib:.1f} MiB"


def test_terminal_escapes_come_back_verbatim_inside_valid_sse(hostile: Episode) -> None:
    hostile.text("write_file", path="/workspace/esc.txt", content=ESCAPES)
    stream = hostile.call("bash", command="cat /workspace/esc.txt")
    assert stream.names() == ["task_id", "end"]
    assert "\x1b" not in stream.raw and "\r" not in stream.raw.replace("\r\n", "")
    assert stream.result()["output"]["blocks"][0]["text"] == ESCAPES
    assert hostile.text("read_file", path="/workspace/esc.txt") == ESCAPES
    # the same bytes in a file name and an error message
    result = hostile.call("read_file", path=f"/workspace/{ESCAPES}").result()
    assert result["ok"] is False and ESCAPES in result["error"]
    assert json.loads(json.dumps(result)) == result
