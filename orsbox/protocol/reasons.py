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
    TIMEOUT = "timeout"  # the episode's time limit passed, or the tool timed out
    REFUSED_BY_POLICY = "refused_by_policy"  # the operator's policy does not allow it
    SESSION_DELETED = "session_deleted"  # the session was deleted while the call waited


OPENREWARD_REASONS = frozenset(
    {Reason.NOT_FOUND, Reason.NAME_COLLISION, Reason.INPUT_VALIDATION, Reason.EPISODE_FINISHED}
)

_LABELLED = re.compile(r"^(?P<reason>[a-z_]+): (?P<text>.*)$", re.S)


def labelled(reason: Reason | str, text: str) -> str:
    """The text a client shows: `reason: text`, the form the openreward client uses."""
    return f"{reason}: {text}"


def unlabelled(text: str) -> tuple[Reason | None, str]:
    """The reason and the bare text of a labelled one; (None, text) for any other."""
    found = _LABELLED.match(text)
    if found is None or found["reason"] not in Reason.__members__.values():
        return None, text
    return Reason(found["reason"]), found["text"]


def openreward_reason(reason: str | None) -> Reason:
    """An `ok: false` answer's reason as the openreward client can read it: its own
    names as they are, anything else (or none) as `input_validation`, as the
    openreward server counts an answer without one."""
    if reason in OPENREWARD_REASONS:
        return Reason(reason)
    return Reason.INPUT_VALIDATION
