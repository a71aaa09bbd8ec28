"""How a tool result travels over Server-Sent Events.

The compact JSON result is cut into pieces of at most `CHUNK_CHARS` characters (code
points, never bytes, so no character is ever split): every piece but the last is a
`chunk` event, the last is `end`. Two rules come from the reference clients:

* the ors-sdk client strips *all* leading whitespace from each data line, so a piece
  must never begin with whitespace. Compact JSON has whitespace only inside strings,
  where `\\uXXXX` is an exact synonym, so a piece that would start with whitespace
  starts with that character's escape instead: the reassembled text is different
  bytes but decodes to the identical value.
* some line readers split on U+0085, U+2028 and U+2029 as well as on CR/LF, so those
  are always sent escaped.
"""

from __future__ import annotations

CHUNK_CHARS = 4096
KEEPALIVE_S = 10

_LINE_BREAKERS = {"\x85": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


def _escape(char: str) -> str:
    return f"\\u{ord(char):04x}"


def _escape_line_breakers(payload: str) -> str:
    for char, escaped in _LINE_BREAKERS.items():
        if char in payload:
            payload = payload.replace(char, escaped)
    return payload


def result_pieces(payload: str, size: int = CHUNK_CHARS) -> list[str]:
    """Cut compact JSON into SSE data pieces; see the module docstring for the rules."""
    payload = _escape_line_breakers(payload)
    if len(payload) <= size:
        return [payload]
    pieces: list[str] = []
    start = 0
    while start < len(payload):
        head = ""
        if pieces and payload[start].isspace():
            head = _escape(payload[start])
            start += 1
        take = size - len(head)
        pieces.append(head + payload[start : start + take])
        start += take
    return pieces


def result_events(payload: str) -> list[dict[str, str]]:
    """The `chunk`... `end` events for one result, ready for an SSE response."""
    pieces = result_pieces(payload)
    events = [{"event": "chunk", "data": piece} for piece in pieces[:-1]]
    events.append({"event": "end", "data": pieces[-1]})
    return events


def encode_event(event: str, data: str) -> bytes:
    """One SSE event as bytes (for responses built without sse-starlette). Data of
    several lines (an error's message) goes as one `data:` line each, as SSE says and
    sse-starlette does: clients join them with newlines, where a bare line would be
    read as a field of its own (the ors-sdk client drops it, or fails on it)."""
    lines = "".join(f"data: {line}\r\n" for line in data.splitlines() or [""])
    return f"event: {event}\r\n{lines}\r\n".encode()
