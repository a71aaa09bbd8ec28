"""What the scripted model does on each task of the bundled environments and of
tests/fixture_envs/eval_envs.py, and the rewards that must come of it.

The bundled environments' own example episodes (environments/*/examples/*.jsonl) are
the correct and wrong attempts, so the graders are checked on known answers.
"""

from __future__ import annotations

import json
from pathlib import Path

from tests.fixture_envs.eval_envs import TASKS
from tests.model_server import Script, Step
from tests.servers import ROOT


def example(env: str, name: str) -> list[Step]:
    """An example episode as model steps: one tool call a reply."""
    path = ROOT / "environments" / env / "examples" / f"{name}.jsonl"
    lines = [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
    return [{"tool": line["name"], "arguments": line.get("input", {})} for line in lines]


def submit(answer: str) -> Step:
    return {"tool": "submit", "arguments": {"answer": answer}}


MALFORMED: list[Step] = [
    {"tool": "submit", "raw": "{answer: 80"},  # not JSON
    {"tool": "sbumit", "arguments": {"answer": "80"}},  # no such tool
    {"tool": "submit", "arguments": {"answr": "80"}},  # fails the schema
    submit("80"),
]

# math, train split, --epochs 2 --max-turns 4 --request-timeout 1
MATH = [
    Script("muffins", [[submit("7")], [submit("8")]]),  # right, then wrong
    Script("12 pages a day", [MALFORMED]),  # recovers from three bad calls
    Script("crayons", [[{"fail": [429, 429]}, submit("39")]]),  # rate-limited twice
    Script("boxes of pencils", [[{**submit("21"), "delay_s": 3}]]),  # times out once
    Script("Lena saves", [[{"say": "Let me think."}], [submit("63")]]),  # no call; wrong
]
MATH_REWARDS = {0: [0.0, 1.0], 1: [1.0, 1.0], 2: [1.0, 1.0], 3: [1.0, 1.0], 4: [0.0, 0.0]}
MATH_SUMMARY = {"mean_reward": 0.7, "pass@1": 0.7, "pass@2": 0.8, "errors": 0}

# the container environments, train split, one attempt each
CONTAINER_SCRIPTS = {
    "coding": [
        Script("is_palindrome", [example("coding", "train-0-wrong")]),
        Script("run_length_encode", [example("coding", "train-1-correct")]),
        Script("def flatten", [example("coding", "train-2-correct")]),
    ],
    "swe": [
        Script("median()", [example("swe", "train-0-correct")]),
        Script("slugify()", [example("swe", "train-0-wrong")]),
    ],
    "terminal": [
        Script("token: kestrel-4471", [example("terminal", "train-0-wrong")]),
        Script("lines containing `ERROR`", [example("terminal", "train-1-correct")]),
    ],
}
CONTAINER_REWARDS = {
    "coding": {0: 0.0, 1: 1.0, 2: 1.0},
    "swe": {0: 1.0, 1: 0.0},
    "terminal": {0: 0.0, 1: 1.0},
}


def sums(*, rendezvous: int | None = None, hold_from: int | None = None) -> list[Script]:
    """tests/fixture_envs/eval_envs.py: every task answered right at once; with `rendezvous`,
    each first reply waits until that many wait together; tasks from `hold_from` on
    are held until the model server is released."""
    scripts = []
    for i in range(TASKS):
        step: Step = submit(str(2 * i))
        if rendezvous:
            step["rendezvous"] = rendezvous
        if hold_from is not None and i >= hold_from:
            step["hold"] = True
        scripts.append(Script(f"[q{i}]", [[step]]))
    scripts.append(Script("[picture]", [[{"tool": "look"}, submit("red")]]))
    return scripts
