"""Why a tool call failed, as a short name every client can show.

A call fails in one of two ways on the wire:

* `end` with `{"ok": false, "error": ..., "reason": ...}` — the call was not run as
  asked (an unknown tool, input that does not fit); the agent can recover. The
  `openreward` client reads `reason` and shows it as `reason: error`; it knows only its
  own names (`OPENREWARD_REASONS`) and guesses `not_found` for anything else, so these
  answers use only those.
* an `error` event — the tool raised, the grader could not run, the sandbox is gone:
  the episode cannot go on. Its text is `reason: message`; every client shows the text,
  and orsbox's own names apply.

A client that does not read `reason` (ors-sdk shows `error` alone) sees the label in the
text too: `labelled`. The openreward client, which writes the label itself, is given the
bare text, so no label appears twice (`orsbox.server.routes.calls`).

An `error` event that is not the model's fault (the grader could not run, the sandbox
died or its engine failed, a timeout of the host's own making, the session deleted
under the call) begins with `INFRA_MARKER`: `[infra] sandbox_gone: ...`. A trainer
masks such a rollout instead of scoring it 0 (docs/infra-failures.md); `is_infra`
finds the marker in the event's text as the clients wrap it. A tool's own failure
(`tool_failed`), the episode's time limit (`timeout` without the marker) and a refusal
by policy are the model's episode and carry no marker.
"""

from __future__ import annotations

import re
from enum import StrEnum


class Reason(StrEnum):
    # openreward's names (openreward.api.errors.ToolCallErrorReason)
    NOT_FOUND = "not_found"  # no tool of that name
    NAME_COLLISION = "name_collision"  # two toolsets define the name (openreward envs)
    INPUT_VALIDATION = "input_validation"  # the input does not fit, or the tool refused it
    EPISODE_FINISHED = "episode_finished"  # a call after finished=True, where refused
    # orsbox's own, for `error` events
    TOOL_FAILED = "tool_failed"  # the tool raised, or returned something not a ToolOutput
    GRADING_ERROR = "grading_error"  # the grader could not run: no reward (GradingError)
    SANDBOX_GONE = "sandbox_gone"  # the sandbox died under the episode (OOM, killed)
    SANDBOX_ERROR = "sandbox_error"  # the sandbox layer failed (engine unreachable, ...)
    TIMEOUT = "timeout"  # the episode's time limit passed, or the tool timed out
    REFUSED_BY_POLICY = "refused_by_policy"  # the operator's policy does not allow it
    SESSION_DELETED = "session_deleted"  # the session was deleted while the call waited
    SERVER_ERROR = "server_error"  # the server failed the call (shutting down, a bug)


OPENREWARD_REASONS = frozenset(
    {Reason.NOT_FOUND, Reason.NAME_COLLISION, Reason.INPUT_VALIDATION, Reason.EPISODE_FINISHED}
)

INFRA_MARKER = "[infra]"

_LABELLED = re.compile(r"^(?:\[infra\] )?(?P<reason>[a-z_]+): (?P<text>.*)$", re.S)
# The marker at the start of the event's text, or after what a client puts before it:
# TRL's "Error: ", ors-sdk's "(sid=...) ", openreward's "(env=... session sid=...) ".
_INFRA = re.compile(r"^(?:Error: )?(?:\([^()]*\) )?\[infra\] [a-z_]+: ")


def labelled(reason: Reason | str, text: str, *, infra: bool = False) -> str:
    """The text a client shows: `reason: text`, the form the openreward client uses;
    `[infra] reason: text` for a failure that is not the model's fault."""
    return f"{INFRA_MARKER + ' ' if infra else ''}{reason}: {text}"


def unlabelled(text: str) -> tuple[Reason | None, str]:
    """The reason and the bare text of a labelled one; (None, text) for any other."""
    found = _LABELLED.match(text)
    if found is None or found["reason"] not in Reason.__members__.values():
        return None, text
    return Reason(found["reason"]), found["text"]


def is_infra(text: str) -> bool:
    """Whether an `error` event's text, as it is or as a client shows it (an
    exception's message, TRL's `Error: ...`), marks a failure that is not the model's."""
    return _INFRA.match(text) is not None


def openreward_reason(reason: str | None) -> Reason:
    """An `ok: false` answer's reason as the openreward client can read it: its own
    names as they are, anything else (or none) as `input_validation`, as the
    openreward server counts an answer without one."""
    if reason in OPENREWARD_REASONS:
        return Reason(reason)
    return Reason.INPUT_VALIDATION
