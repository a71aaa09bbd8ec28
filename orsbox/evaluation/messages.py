"""ORS on one side, OpenAI chat completions on the other: prompt blocks become the first
user message, tool specs become function tools, a tool result becomes a tool message.

Chat-completions tool messages carry text only, so the images of a tool result follow
it in a user message of their own (the way OpenAI's docs send images to a model).
"""

from __future__ import annotations

import json
from typing import Any

EMPTY_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}
NO_TOOL_CALL = (
    "You did not call a tool. Use the tools to work on the task; the episode ends when a "
    "tool tells you it is finished (usually the submit tool)."
)


def user_message(blocks: list[dict[str, Any]]) -> dict[str, Any]:
    """The prompt: text blocks as text parts, image blocks as image parts."""
    return {"role": "user", "content": [_part(block) for block in blocks]}


def function_tools(specs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """ORS tool specs as OpenAI function tools (a tool without parameters gets an empty
    object schema: the API rejects `null`)."""
    return [
        {
            "type": "function",
            "function": {
                "name": spec["name"],
                "description": spec.get("description") or "",
                "parameters": spec.get("input_schema") or EMPTY_SCHEMA,
            },
        }
        for spec in specs
    ]


def tool_messages(call_id: str, result: dict[str, Any]) -> list[dict[str, Any]]:
    """The answer to one tool call: its text as the tool message, and its images (if
    any) in a user message after it. A failed call's error is the text."""
    if not result.get("ok"):
        return [_tool_text(call_id, f"Error: {result.get('error')}")]
    blocks = result["output"].get("blocks") or []
    texts = [b.get("text", "") for b in blocks if b.get("type") != "image"]
    images = [_part(b) for b in blocks if b.get("type") == "image"]
    text = "\n".join(texts) or ("(see the image below)" if images else "(no output)")
    messages = [_tool_text(call_id, text)]
    if images:
        messages.append({"role": "user", "content": images})
    return messages


def error_message(call_id: str, error: str) -> dict[str, Any]:
    """A tool call the environment never saw (its arguments are not JSON), answered the
    way the environment answers invalid input."""
    return _tool_text(call_id, f"Error: {error}")


def parse_arguments(raw: str | None) -> tuple[dict[str, Any] | None, str | None]:
    """(arguments, None) or (None, why they are unusable)."""
    try:
        arguments = json.loads(raw or "{}")
    except ValueError as e:
        return None, f"the arguments are not valid JSON ({e}); send a JSON object"
    if not isinstance(arguments, dict):
        return None, "the arguments must be a JSON object"
    return arguments, None


def _tool_text(call_id: str, text: str) -> dict[str, Any]:
    return {"role": "tool", "tool_call_id": call_id, "content": text}


def _part(block: dict[str, Any]) -> dict[str, Any]:
    if block.get("type") == "image":
        url = f"data:{block.get('mimeType', 'image/png')};base64,{block.get('data', '')}"
        return {"type": "image_url", "image_url": {"url": url}}
    return {"type": "text", "text": block.get("text", "")}
