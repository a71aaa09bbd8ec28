"""`orsbox.integrations.platoon.mask_infra_failures` on stand-ins for platoon's service,
session and `Outcome` (platoon needs Python 3.12; test_platoon_source.py runs the helper
on the real one): which texts count, and what a rollout with one is graded."""

from __future__ import annotations

import asyncio
import sys
import types
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from orsbox.integrations.platoon import is_infra_result, mask_infra_failures

SID = "(environment session sid=0137c71d.vm) "


@dataclass
class Outcome:
    status: str
    reward: float | None = None
    reason: str | None = None
    failure_kind: str | None = None
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def trainable(self) -> bool:
        return self.status == "scored"

    @classmethod
    def infra(cls, kind: str, *, reason: str, metadata: dict[str, Any]) -> Outcome:
        return cls("error", None, reason, kind, metadata)


@dataclass
class Result:
    text: str
    is_error: bool

    @property
    def content(self) -> list[dict[str, str]]:
        return [{"type": "text", "text": self.text}]


class Session:
    def __init__(self, rollout_id: str, answers: dict[str, Result], grade: Outcome) -> None:
        self.rollout_id, self.answers, self.outcome = rollout_id, answers, grade

    async def call_tool(self, name: str, arguments: Any) -> Result:
        return self.answers[name]

    async def fork(self, mode: str = "shared") -> Session:
        return Session(self.rollout_id, self.answers, self.outcome)

    async def grade(self) -> Outcome:
        return self.outcome


class Service:
    def __init__(self, session: Session) -> None:
        self.session = session

    async def open(self, task: Any, *, rollout_id: str) -> Session:
        return self.session

    async def open_fork(self, task: Any, **kwargs: Any) -> Session:
        return self.session


@pytest.fixture(autouse=True)
def fake_platoon(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    module = types.ModuleType("platoon.envs.service")
    module.Outcome = Outcome  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "platoon.envs.service", module)
    yield


def test_which_texts_are_infrastructure() -> None:
    gone = "[infra] sandbox_gone: tool 'bash' failed: SandboxGone: sandbox 3f2a is gone"
    assert is_infra_result(f"ToolFailed: {SID}{gone}")
    assert is_infra_result(f"The env session is gone: ToolFailed: {SID}{gone}")
    assert is_infra_result(gone)
    # a tool's own failure quoting the marker (text a model can choose) is not one
    assert not is_infra_result(f"ToolFailed: {SID}tool_failed: tool 'x' failed: KeyError: '{gone}'")
    assert not is_infra_result("ToolFailed: [infra]")


def _graded(answers: dict[str, Result], outcome: Outcome, calls: list[str]) -> Outcome:
    async def play() -> Outcome:
        service = mask_infra_failures(Service(Session("r0", answers, outcome)))
        session = await service.open(None, rollout_id="r0")
        child = await session.fork()
        for name in calls:
            await child.call_tool(name, {})  # a fork's failure marks its rollout
        return await session.grade()

    return asyncio.run(play())


def test_a_marked_failure_masks_the_rollouts_score() -> None:
    gone = Result(f"ToolFailed: {SID}[infra] sandbox_gone: tool 'bash' failed", True)
    no_submit = Outcome("scored", 0.0, "no_submit")
    masked = _graded({"bash": gone}, no_submit, ["bash"])
    assert (masked.status, masked.reward, masked.failure_kind) == ("error", None, "orsbox_infra")
    assert masked.reason == gone.text
    assert masked.metadata == {"masked_outcome": "scored", "masked_reward": 0.0}


def test_other_rollouts_stand_as_graded() -> None:
    own = Result(f"ToolFailed: {SID}tool_failed: tool 'bash' failed: ValueError: x", True)
    fine = Result("ok", False)
    no_submit = Outcome("scored", 0.0, "no_submit")
    assert _graded({"bash": own}, no_submit, ["bash"]) is no_submit
    assert _graded({"bash": fine}, no_submit, ["bash"]) is no_submit
    already = Outcome("error", None, "env_error", "env_error")  # platoon's own infra error
    gone = Result(f"ToolFailed: {SID}[infra] grading_error: no runner", True)
    assert _graded({"submit": gone}, already, ["submit"]) is already
