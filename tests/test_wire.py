"""Wire types serialise exactly as the spec shows; SSE pieces obey the client rules."""

from __future__ import annotations

import json

import pytest

from orsbox.protocol.sse import CHUNK_CHARS, encode_event, result_events, result_pieces
from orsbox.protocol.types import (
    CreateSession,
    ImageBlock,
    RunToolError,
    RunToolOutput,
    RunToolSuccess,
    TextBlock,
    ToolOutput,
    ToolSpec,
)


def test_tool_output_always_carries_every_field() -> None:
    out = RunToolSuccess(
        output=ToolOutput(blocks=[TextBlock(text="Correct!")], reward=1.0, finished=True)
    )
    assert out.model_dump_json() == (
        '{"ok":true,"output":{"blocks":[{"text":"Correct!","detail":null,"type":"text"}],'
        '"metadata":null,"reward":1.0,"finished":true}}'
    )
    assert (
        RunToolError(error="x", reason="not_found").model_dump_json()
        == '{"ok":false,"error":"x","reason":"not_found"}'
    )


def test_blocks_and_specs() -> None:
    image = ImageBlock(data="AA==", mimeType="image/png")
    assert image.model_dump() == {
        "data": "AA==",
        "mimeType": "image/png",
        "detail": None,
        "type": "image",
    }
    spec = ToolSpec(name="reset", description="Reset", input_schema=None)
    assert spec.model_dump_json() == '{"name":"reset","description":"Reset","input_schema":null}'
    parsed = RunToolOutput.model_validate_json('{"ok":false,"error":"e"}')
    assert isinstance(parsed.root, RunToolError)


@pytest.mark.parametrize(
    "body",
    [{}, {"task_spec": {}, "split": "a", "index": 0}, {"split": "a"}, {"index": 1}],
)
def test_create_session_needs_exactly_one_task_source(body: dict) -> None:
    with pytest.raises(ValueError):
        CreateSession.model_validate(body)


def _payload(text: str) -> str:
    return json.dumps({"ok": True, "text": text}, separators=(",", ":"), ensure_ascii=False)


@pytest.mark.parametrize(
    "text",
    [
        "a" * 10_000,
        "x" * (CHUNK_CHARS - 11) + " " * 20_000 + "y",  # a whitespace run longer than a piece
        ("é日本\u00a0\u3000 " * 3000),  # non-ASCII and Unicode whitespace at boundaries
        "line\u2028sep\u2029par\x85nel" * 500,
        "😀" * 5000,  # astral characters are never split
    ],
)
def test_pieces_reassemble_exactly_and_never_start_with_whitespace(text: str) -> None:
    payload = _payload(text)
    pieces = result_pieces(payload)
    assert all(len(p) <= CHUNK_CHARS for p in pieces)
    assert not any(p[0].isspace() for p in pieces)
    assert not any(c in p for p in pieces for c in "\r\n\x85\u2028\u2029")
    assert json.loads("".join(p.lstrip() for p in pieces))["text"] == text
    for p in pieces:
        p.encode("utf-8")  # no lone surrogates: no character was split


def test_small_results_are_one_end_event() -> None:
    assert result_events('{"ok":true}') == [{"event": "end", "data": '{"ok":true}'}]
    events = result_events(_payload("z" * 9000))
    assert [e["event"] for e in events] == ["chunk", "chunk", "end"]


def test_an_event_of_several_lines_sends_a_data_line_each() -> None:
    """A bare line would be a field of its own: the ors-sdk client drops one with a
    colon (`/usr/bin/python3: No module named pip`) and fails on one without."""
    sent = encode_event("error", "runner missing; said:\n/usr/bin/python3: x\nno colon")
    assert sent == (
        b"event: error\r\ndata: runner missing; said:\r\ndata: /usr/bin/python3: x\r\n"
        b"data: no colon\r\n\r\n"
    )
    assert encode_event("end", "") == b"event: end\r\ndata: \r\n\r\n"
