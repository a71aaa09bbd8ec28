"""A small Inspect task for the provider's end-to-end test, run with the real `inspect
eval` CLI: a scripted model (Inspect's `mockllm`) writes a file with the `bash` tool,
checks it with the `python` tool, and a scorer reads the file back from the sandbox.

Every scripted output carries its own token usage: without it, mockllm counts tokens
with tiktoken, which downloads its tables (no network here).
"""

from __future__ import annotations

from inspect_ai import Task, task
from inspect_ai.dataset import Sample
from inspect_ai.model import ModelOutput, ModelUsage, get_model
from inspect_ai.scorer import CORRECT, INCORRECT, Score, Target, accuracy, scorer
from inspect_ai.solver import TaskState, generate, use_tools
from inspect_ai.tool import bash, python
from inspect_ai.util import sandbox

from orsbox.integrations.inspect import OrsboxSandboxConfig

ANSWER_FILE = "answer.txt"
USAGE = ModelUsage(input_tokens=10, output_tokens=5, total_tokens=15)


def scripted(answer: str) -> list[ModelOutput]:
    calls = [
        ("bash", {"command": f"echo {answer} > {ANSWER_FILE}; whoami"}),
        ("python", {"code": f"print(open({ANSWER_FILE!r}).read().strip() * 2)"}),
    ]
    outputs = [ModelOutput.for_tool_call("mockllm/model", name, args) for name, args in calls]
    outputs.append(ModelOutput.from_content("mockllm/model", "done"))
    for output in outputs:
        output.usage = USAGE
    return outputs


@scorer(metrics=[accuracy()])
def answer_file():
    async def score(state: TaskState, target: Target) -> Score:
        written = (await sandbox().read_file(ANSWER_FILE)).strip()
        return Score(value=CORRECT if written == target.text else INCORRECT, answer=written)

    return score


@task
def orsbox_answer(url: str = "", token: str = "", answer: str = "42") -> Task:
    """`-T url=... -T token=...` runs the sandboxes on an orsbox server or router;
    without, in-process on the local engine. `answer` is what the model writes (the
    target is 42, so any other answer must score 0)."""
    config = OrsboxSandboxConfig(url=url or None, token=token or None)
    return Task(
        dataset=[Sample(input=f"Write 42 to {ANSWER_FILE}.", target="42")],
        solver=[use_tools(bash(timeout=60), python(timeout=60)), generate()],
        scorer=answer_file(),
        sandbox=("orsbox", config),
        model=get_model("mockllm/model", custom_outputs=scripted(answer)),
    )


@task
def orsbox_wrong_answer(url: str = "", token: str = "") -> Task:
    """`orsbox_answer` with the model writing 41: it must score 0. A task of its own, so
    that one `inspect eval` runs both (Inspect's import is most of an eval's CPU)."""
    return orsbox_answer(url, token, answer="41")
