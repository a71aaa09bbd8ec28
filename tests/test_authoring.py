"""The authoring API: tools, schemas, task defaults, and ors-sdk source compatibility."""

from __future__ import annotations

import asyncio
import shutil
from collections.abc import Iterator
from pathlib import Path

import pandas as pd
import pytest
from ors.client import ORS
from pydantic import BaseModel

from orsbox import Environment, TextBlock, ToolOutput, tool
from orsbox.authoring import SingleTask, call_tool, find_tools
from orsbox.protocol.types import RunToolError
from tests.servers import LiveServer, start_server

COMPAT = Path(__file__).parent / "compat"


class Params(BaseModel):
    """Parameters."""

    n: int


class Tools(Environment):
    @classmethod
    def list_splits(cls):
        return ["train"]

    @classmethod
    def list_tasks(cls, split):
        return [{"i": i} for i in range(10)]

    def get_prompt(self):
        return [TextBlock(text="p")]

    @tool
    async def double(self, params: Params) -> ToolOutput:
        """Double a number.

        Longer explanation."""
        return ToolOutput(blocks=[TextBlock(text=str(params.n * 2))])

    @tool(shared=False)
    def secret_move(self) -> ToolOutput:
        """Only in sessions."""
        return ToolOutput(blocks=[TextBlock(text="moved")], finished=True)


class ByIndex(Environment):
    """Only num_tasks + get_task: the index API for huge splits."""

    @classmethod
    def list_splits(cls):
        return ["all"]

    @classmethod
    async def num_tasks(cls, split):
        return 1000

    @classmethod
    async def get_task(cls, split, index):
        if not 0 <= index < 1000:
            raise IndexError(index)
        return {"i": index}

    def get_prompt(self):
        return []

    @tool
    def noop(self) -> ToolOutput:
        """Nothing."""
        return ToolOutput(blocks=[])


def test_tool_specs() -> None:
    tools = find_tools(Tools)
    assert list(tools) == ["double", "secret_move"]
    assert tools["double"].spec.description == "Double a number.\n\nLonger explanation."
    assert tools["double"].spec.input_schema == Params.model_json_schema()
    assert tools["secret_move"].spec.input_schema is None
    assert [t.name for t in Tools.list_tools().tools] == ["double"]
    assert [t.name for t in Tools().list_task_tools().tools] == ["secret_move"]


def test_a_tool_with_two_parameters_is_refused() -> None:
    class Bad(Tools):
        @tool
        def two(self, a: Params, b: Params) -> ToolOutput:
            return ToolOutput(blocks=[])

    with pytest.raises(TypeError, match="at most one pydantic model"):
        find_tools(Bad)


def test_call_tool_validates_and_names_tools() -> None:
    env = Tools()
    ok = asyncio.run(call_tool(env, "double", {"n": 21}))
    assert ok.output.blocks[0].text == "42"  # type: ignore[union-attr]
    bad = asyncio.run(call_tool(env, "double", {"n": "x"}))
    assert isinstance(bad, RunToolError) and "n: Input should be a valid integer" in bad.error
    missing = asyncio.run(call_tool(env, "triple", {}))
    assert missing.error == "unknown tool 'triple'; available tools: double, secret_move"  # type: ignore[union-attr]


def test_single_task_is_one_task_in_a_test_split_with_its_prompt() -> None:
    class Playground(SingleTask):
        prompt = "explore"

    assert Playground.list_splits() == ["test"]
    assert asyncio.run(Playground.get_task_range("test")) == [{}]
    assert Playground().get_prompt() == [TextBlock(text="explore")]


def test_task_defaults_follow_python_slices() -> None:
    assert asyncio.run(Tools.num_tasks("train")) == 10
    assert asyncio.run(Tools.get_task("train", -1)) == {"i": 9}
    assert asyncio.run(Tools.get_task_range("train", -3, None)) == [{"i": 7}, {"i": 8}, {"i": 9}]
    assert asyncio.run(ByIndex.get_task_range("all", 998, None)) == [{"i": 998}, {"i": 999}]
    assert asyncio.run(ByIndex.get_task_range("all", -1)) == [{"i": 999}]


# -- the spec's examples, verbatim but for the import line -----------------------------
def test_compat_sources_differ_from_the_spec_only_in_imports() -> None:
    for name in ("gsm8k_env.py", "math_env.py"):
        imports = [
            line
            for line in (COMPAT / name).read_text().splitlines()
            if "import" in line and "orsbox" in line
        ]
        assert len(imports) == 1 and imports[0].startswith("from orsbox import ")


@pytest.fixture(scope="module")
def gsm8k_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """The quick start's GSM8K environment, run from a folder holding its parquet files."""
    work = tmp_path_factory.mktemp("gsm8k")
    rows = [
        {
            "question": "Natalia sold clips to 48 of her friends in April, and then she sold half as many clips in May. How many clips did Natalia sell altogether in April and May?",
            "answer": "Natalia sold 48/2 = <<48/2=24>>24 clips in May.\nNatalia sold 48+24 = <<48+24=72>>72 clips altogether in April and May.\n#### 72",
        },
        {
            "question": "Weng earns $12 an hour for babysitting. Yesterday, she just did 50 minutes of babysitting. How much did she earn?",
            "answer": "Weng earns 12/60 = $<<12/60=0.2>>0.2 per minute.\nWorking 50 minutes, she earned 0.2 x 50 = $<<0.2*50=10>>10.\n#### 10",
        },
    ]
    pd.DataFrame(rows).to_parquet(work / "train-00000-of-00001.parquet")
    pd.DataFrame(rows[1:]).to_parquet(work / "test-00000-of-00001.parquet")
    shutil.copy(COMPAT / "gsm8k_env.py", work / "gsm8k_env.py")
    shutil.copy(COMPAT / "math_env.py", work / "math_env.py")
    server = start_server(["gsm8k_env.py", "math_env.py"], work, cwd=work)
    yield server
    server.stop()


def test_quickstart_gsm8k_environment(gsm8k_server: LiveServer) -> None:
    with ORS(base_url=gsm8k_server.url) as client:
        env = client.environment("gsm8kenvironment")
        assert env.list_splits() == ["train", "test"]
        tasks = env.list_tasks(split="train")
        assert len(tasks) == 2 and tasks[0].task_spec["id"] == "0"
        tools = env.list_tools()
        assert (
            tools[0].name == "submit"
            and tools[0].description == "Submit your answer to the math problem"
        )
        with env.session(task=tasks[0]) as session:
            assert session.get_prompt()[0].text.startswith("Natalia sold clips")
            result = session.call_tool("submit", {"answer": "72"})
            assert (result.blocks[0].text, result.reward, result.finished) == (
                "Correct!",
                1.0,
                True,
            )
        with env.session(task=tasks[1]) as session:
            result = session.call_tool("submit", {"answer": "11"})
            assert (result.blocks[0].text, result.reward) == ("Incorrect. The answer was 10.", 0.0)


def test_index_page_math_env(gsm8k_server: LiveServer) -> None:
    with ORS(base_url=gsm8k_server.url) as client:
        env = client.environment("mathenv")
        tasks = env.list_tasks(split="test")
        with env.session(task=tasks[0]) as session:
            assert session.get_prompt()[0].text == "What is 2+2?"
            result = session.call_tool("submit", {"answer": "4"})
            assert (result.reward, result.finished) == (1.0, True)
