"""The pure parts of `orsbox eval`: pass@k, --tasks, and a results file a kill tore."""

from __future__ import annotations

import json
from math import comb
from pathlib import Path

import pytest

from orsbox.client import ClientError, ResultReader, ToolFailed
from orsbox.evaluation.report import pass_at_k, summarize
from orsbox.evaluation.results import ResultsError, ResultStore
from orsbox.evaluation.tasks import TaskSelectionError, select_tasks

TASKS = [{"id": "median-even"}, {"id": "slugify"}, {"instance_id": "a__b-1"}, {}, {}, {}]
RUN = {"env": "math", "split": "train", "model": "m"}


def test_pass_at_k_is_the_unbiased_estimator() -> None:
    assert pass_at_k(10, 0, 1) == 0.0 and pass_at_k(10, 10, 5) == 1.0
    assert pass_at_k(2, 1, 1) == 0.5 and pass_at_k(2, 1, 2) == 1.0
    assert pass_at_k(10, 3, 2) == pytest.approx(1 - comb(7, 2) / comb(10, 2))  # 8/15
    assert pass_at_k(5, 4, 2) == 1.0  # fewer failures than draws: a pass is certain
    with pytest.raises(ValueError, match="pass@3 needs at least 3 attempts"):
        pass_at_k(2, 1, 3)


def test_summary_leaves_errors_out_of_the_means() -> None:
    def record(task: int, status: str, reward: float | None) -> dict:
        return {
            "task": task,
            "status": status,
            "reward": reward,
            "error": status,
            "turns": 2,
            "prompt_tokens": 10,
            "completion_tokens": 5,
        }

    records = [
        record(0, "finished", 1.0),
        record(0, "finished", 0.0),
        record(1, "max_turns", None),
        record(1, "error", None),
    ]
    summary = summarize(records, k=2, threshold=1.0, wall_s=1.0)
    assert (summary["episodes"], summary["errors"], summary["mean_reward"]) == (4, 1, 0.3333)
    # task 1 has one attempt that counts: in pass@1, not in pass@2
    assert (summary["pass@1"], summary["pass@2"], summary["tasks_with_k_attempts"]) == (
        0.25,
        1.0,
        1,
    )


def test_tasks_by_index_range_and_id() -> None:
    assert select_tasks(None, TASKS) == [0, 1, 2, 3, 4, 5]
    assert select_tasks("4-5,median-even,a__b-1, 4", TASKS) == [4, 5, 0, 2]
    for bad, message in [
        ("9", "index 9 is past the split's 6 tasks"),
        ("3-1", "runs backwards"),
        ("nope", "no task has the id 'nope'"),
    ]:
        with pytest.raises(TaskSelectionError, match=message):
            select_tasks(bad, TASKS)


def test_a_torn_last_line_is_cut_off_and_the_folder_is_locked(tmp_path: Path) -> None:
    record = {"split": "train", "task": 0, "epoch": 0, "status": "finished", "reward": 1.0}
    store = ResultStore(tmp_path)
    assert store.open(RUN) == {}
    store.append(record, {"messages": []})
    with pytest.raises(ResultsError, match="in use by another orsbox eval"):
        ResultStore(tmp_path).open(RUN)
    store.close()
    with (tmp_path / "results.jsonl").open("a") as f:
        f.write('{"split": "train", "task": 1, "ep')  # killed mid-write
    again = ResultStore(tmp_path)
    assert list(again.open(RUN)) == [("train", 0, 0)]
    again.append({**record, "task": 1}, {"messages": []})
    lines = (tmp_path / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["task"] for line in lines] == [0, 1]
    again.close()
    with pytest.raises(ResultsError, match="holds a run with model 'm', not 'other'"):
        ResultStore(tmp_path).open({**RUN, "model": "other"})


def test_the_result_reader_joins_chunks_and_names_what_is_wrong() -> None:
    def read(lines: list[str]) -> dict | None:
        reader = ResultReader()
        results = [reader.feed(line) for line in lines]
        return next((r for r in results if r is not None), None)

    chunks = ["event: task_id", "data: t1", "", ": ping", "event: chunk", 'data: {"ok": tr', ""]
    assert read([*chunks, "event: end", 'data: ue, "output": {}}', ""]) == {
        "ok": True,
        "output": {},
    }
    with pytest.raises(ToolFailed, match="the tool failed: ValueError: boom"):
        read(["event: error", "data: ValueError: boom", ""])
    with pytest.raises(ClientError, match="the tool result: the server's answer is not JSON"):
        read(["event: end", "data: <html>", ""])
