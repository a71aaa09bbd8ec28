"""Loading datasets: every file kind, splits, instance filters, and bad input stopping
the load with the file, the row and the problem. No Docker needed."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from orsbox.errors import ManifestError
from orsbox.formats.swebench import load
from orsbox.formats.swebench.images import official_image
from tests.formats.swebench import dataset
from tests.formats.swebench.conftest import options

HEAD = "0" * 40


@pytest.fixture(autouse=True)
def fixed_head(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows need a base commit, not a built image, to be loaded."""
    monkeypatch.setattr(dataset, "base_commit", lambda: HEAD)


def rows() -> list[dict[str, Any]]:
    return [dataset.v4_row(), dataset.v5_row("me/calc:5"), dataset.rebench_row("me/calc:9")]


def ids(path: Path, **changes: Any) -> dict[str, list[str]]:
    (env,) = load(path, options(test_cmd="pytest -rA", **changes))
    return {s.name: [t["instance_id"] for t in env.list_tasks(s.name)] for s in env.list_splits()}


ALL = ["pytest-dev__pytest-1", "calc__calc-5", "calc__calc-9"]


def test_jsonl_json_parquet_and_a_datasets_folder_load_alike(tmp_path: Path) -> None:
    data = rows()
    jsonl = dataset.write_jsonl(tmp_path / "test.jsonl", data)
    (tmp_path / "test.json").write_text(json.dumps(data))

    def hub_style(row: dict[str, Any]) -> dict[str, Any]:  # one type per column
        lists = {
            k: json.dumps(row[k])
            for k in ("FAIL_TO_PASS", "PASS_TO_PASS")
            if not isinstance(row[k], str)
        }
        config = row.get("install_config")
        return {**row, **lists, "install_config": json.dumps(config) if config else None}

    table = pa.Table.from_pylist([hub_style(r) for r in data])
    pq.write_table(table, tmp_path / "test.parquet")
    folder = tmp_path / "saved" / "test"
    folder.mkdir(parents=True)
    arrow = str(folder / "data-00000-of-00001.arrow")
    with pa.OSFile(arrow, "wb") as sink, pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    (folder / "state.json").write_text(
        json.dumps({"_data_files": [{"filename": "data-00000-of-00001.arrow"}], "_split": "test"})
    )
    (folder / "dataset_info.json").write_text("{}")
    (tmp_path / "saved" / "dataset_dict.json").write_text(json.dumps({"splits": ["test"]}))
    for path in (
        jsonl,
        tmp_path / "test.json",
        tmp_path / "test.parquet",
        folder,
        tmp_path / "saved",
    ):
        assert ids(path) == {"test": ALL}, path


def test_split_from_a_column_or_the_option(tmp_path: Path) -> None:
    data = rows()
    data[0]["split"] = "train"
    path = dataset.write_jsonl(tmp_path / "swe.jsonl", data)
    assert ids(path) == {"train": ALL[:1], "swe": ALL[1:]}
    assert ids(path, split="dev") == {"dev": ALL}


def test_instances_filter_and_unknown_ids(tmp_path: Path) -> None:
    path = dataset.write_jsonl(tmp_path / "test.jsonl", rows())
    assert ids(path, instances=("calc__calc-9",)) == {"test": ["calc__calc-9"]}
    with pytest.raises(ManifestError, match="no row has instance id nope"):
        ids(path, instances=("nope",))


def test_tasks_carry_no_gold_patch_or_tests(tmp_path: Path) -> None:
    (env,) = load(dataset.write_jsonl(tmp_path / "t.jsonl", rows()), options(test_cmd="x"))
    assert env.list_tasks("t")[0] == {
        "instance_id": "pytest-dev__pytest-1",
        "repo": "pytest-dev/pytest",
    }


def test_lists_as_lists_or_json_strings_read_the_same(tmp_path: Path) -> None:
    as_text, as_list = dataset.v4_row(), dataset.v4_row()
    as_list.update(FAIL_TO_PASS=dataset.F2P, PASS_TO_PASS=dataset.P2P, instance_id="a__b-2")
    (env,) = load(
        dataset.write_jsonl(tmp_path / "t.jsonl", [as_text, as_list]),
        options(test_cmd="pytest -rA"),
    )
    first, second = env.tasks.values()
    assert first.fail_to_pass == second.fail_to_pass == dataset.F2P
    assert first.pass_to_pass == second.pass_to_pass == dataset.P2P


def test_official_image_names() -> None:
    assert official_image("django__django-11099") == (
        "swebench/sweb.eval.x86_64.django_1776_django-11099:latest"
    )
    assert official_image("getmoto__moto-7365", "swe-gym") == (
        "xingyaoww/sweb.eval.x86_64.getmoto_s_moto-7365:latest"
    )


def test_image_template_and_map(tmp_path: Path) -> None:
    path = dataset.write_jsonl(tmp_path / "t.jsonl", [dataset.v4_row()])
    (env,) = load(path, options(test_cmd="x", image_template="reg.local/{id_1776}:v1"))
    assert env.tasks["pytest-dev__pytest-1"].image == "reg.local/pytest-dev_1776_pytest-1:v1"


def _broken(tmp_path: Path, change: dict[str, Any], drop: str | None = None) -> str:
    row = dataset.v4_row()
    row.update(change)
    if drop:
        del row[drop]
    path = dataset.write_jsonl(tmp_path / "bad.jsonl", [dataset.v5_row("me/x:1"), row])
    with pytest.raises(ManifestError) as caught:
        load(path, options(test_cmd="pytest -rA"))
    message = str(caught.value)
    assert str(path) in message and "row 1 (pytest-dev__pytest-1)" in message, message
    return message


@pytest.mark.parametrize(
    ("change", "drop", "problem"),
    [
        ({}, "problem_statement", "missing required field 'problem_statement'"),
        ({}, "FAIL_TO_PASS", "missing required field 'FAIL_TO_PASS'"),
        ({"PASS_TO_PASS": '["a", '}, None, "field 'PASS_TO_PASS' is not a JSON list"),
        ({"FAIL_TO_PASS": "[1, 2]"}, None, "must be a list of test ids"),
        ({"log_parser": "parse_log_cobol"}, None, "unknown log parser 'parse_log_cobol'"),
        ({"base_commit": 7}, None, "field 'base_commit' must be a string"),
    ],
)
def test_bad_rows_stop_the_load(
    tmp_path: Path, change: dict[str, Any], drop: str | None, problem: str
) -> None:
    assert problem in _broken(tmp_path, change, drop)


@pytest.mark.parametrize(
    ("name", "content", "problem"),
    [
        ("missing.jsonl", None, "no such file or folder"),
        ("bad.jsonl", '{"instance_id": 1}\n{oops\n', "line 2: not JSON"),
        ("bad.json", '{"rows": 1}', "a JSON dataset is a list of rows"),
        ("bad.parquet", "not parquet", "not a Parquet file"),
        ("rows.csv", "a,b", "not a dataset"),
        ("empty.jsonl", "", "the dataset has no rows"),
    ],
)
def test_unreadable_files_stop_the_load(
    tmp_path: Path, name: str, content: str | None, problem: str
) -> None:
    path = tmp_path / name
    if content is not None:
        path.write_text(content)
    with pytest.raises(ManifestError, match=problem) as caught:
        load(path, options())
    assert str(path) in str(caught.value)


def test_a_file_that_is_not_text(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b'{"instance_id": "\xff\xfe"}\n')
    with pytest.raises(ManifestError, match="not UTF-8 text"):
        load(path, options())


def test_unknown_tool(tmp_path: Path) -> None:
    path = dataset.write_jsonl(tmp_path / "t.jsonl", [dataset.v5_row("me/x:1")])
    with pytest.raises(ManifestError, match="unknown tool"):
        load(path, options(tools=("bash", "browser")))


def test_orsbox_serve_stops_at_load_naming_file_row_and_problem(tmp_path: Path) -> None:
    from tests.environments.conftest import orsbox

    row = dataset.v4_row()
    del row["base_commit"]
    path = dataset.write_jsonl(tmp_path / "bad.jsonl", [row])
    wide = {**os.environ, "COLUMNS": "300"}  # the error panel unwrapped
    done = orsbox("serve", f"swebench:{path}", "--port", "1", timeout=120, env=wide)
    message = " ".join(done.stderr.replace("│", " ").split())
    assert done.returncode != 0
    assert "row 0 (pytest-dev__pytest-1): missing required field 'base_commit'" in message
    assert "bad.jsonl" in message


def test_v4_rows_take_swebench_4s_spec_tables() -> None:
    """swebench 5 has no per-repo spec tables; orsbox ships swebench 4.1.0's, so a v4 row
    gets its repository's test command, set-up commands and install step at its version
    without --test-cmd, in the order swebench 4's eval script runs them."""
    from orsbox.formats.swebench import harness

    pytest_spec = harness.v4_specs("pytest-dev/pytest", "5.4")
    assert pytest_spec == {"test_cmd": "pytest -rA", "install": "python -m pip install -e ."}
    django = harness.v4_specs("django/django", "3.0")
    assert django is not None and django["test_cmd"].startswith("./tests/runtests.py")
    assert "export LANG=en_US.UTF-8" in django["eval_commands"]
    assert harness.v4_specs("pytest-dev/pytest", "0.1") is None


def test_a_v4_row_gets_its_eval_script_from_the_tables(tmp_path: Path) -> None:
    (env,) = load(dataset.write_jsonl(tmp_path / "t.jsonl", [dataset.v4_row()]), options())
    script = env.tasks["pytest-dev__pytest-1"].eval_script
    assert "pytest -rA tests/test_ops.py" in script
    assert script.index("python -m pip install -e .") < script.index("git apply -v -")
    assert script.startswith("#!/bin/bash\nset -uxo pipefail\nsource /opt/miniconda3/bin/activate")


def test_a_v4_row_the_tables_do_not_know_needs_a_test_command(tmp_path: Path) -> None:
    row = {**dataset.v4_row(), "version": "0.1"}
    with pytest.raises(
        ManifestError, match=r"pytest-dev/pytest version 0\.1; give one with --test"
    ):
        load(dataset.write_jsonl(tmp_path / "t.jsonl", [row]), options())
    (env,) = load(dataset.write_jsonl(tmp_path / "t.jsonl", [row]), options(test_cmd="pytest"))
    assert "pytest tests/test_ops.py" in env.tasks["pytest-dev__pytest-1"].eval_script


def test_django_test_directives_are_modules() -> None:
    from orsbox.formats.swebench.families import directives

    patch = "diff --git a/tests/utils_tests/test_text.py b/tests/utils_tests/test_text.py\n"
    patch += "diff --git a/tests/data/x.json b/tests/data/x.json\n"
    assert directives("django/django", patch) == ["utils_tests.test_text"]
    assert directives("psf/requests", patch) == ["tests/utils_tests/test_text.py"]


def test_prompt_is_the_problem_statement_and_hints_only_when_asked(tmp_path: Path) -> None:
    path = dataset.write_jsonl(tmp_path / "t.jsonl", [dataset.v4_row()])
    for hints, expected in ((False, dataset.PROBLEM), (True, f"{dataset.PROBLEM}\n\nHints:\n")):
        (env,) = load(path, options(test_cmd="x", hints=hints))
        text = env({"instance_id": "pytest-dev__pytest-1"}).get_prompt()[0].text
        assert text == expected + ("Look at div." if hints else "")


def test_a_repositorys_log_parser_has_swebenchs_name_for_it(tmp_path: Path) -> None:
    """swebench files one parser under several repositories' names (parse_log_pytest is
    also parse_log_xarray, parse_log_flask, ...): the function's own name is reported."""
    from orsbox.formats.swebench import harness

    parsers = harness.repo_parsers()
    assert parsers["pytest-dev/pytest"] == parsers["pydata/xarray"] == "parse_log_pytest"
    assert parsers["django/django"] == "parse_log_django"
    (env,) = load(dataset.write_jsonl(tmp_path / "t.jsonl", [dataset.v4_row()]), options())
    assert env.tasks["pytest-dev__pytest-1"].log_parser == "parse_log_pytest"


def test_grading_comes_from_the_option_else_orsbox_grading(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = dataset.write_jsonl(tmp_path / "t.jsonl", [dataset.v4_row()])
    assert load(path, options())[0].grading_mode == "official"  # type: ignore[attr-defined]
    monkeypatch.setenv("ORSBOX_GRADING", "strict")
    assert load(path, options())[0].grading_mode == "strict"  # type: ignore[attr-defined]
    chosen = load(path, options(grading="official"))[0]
    assert chosen.grading_mode == "official"  # type: ignore[attr-defined]


def test_grading_option_on_the_command_line(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from orsbox.cli.main import app

    path = dataset.write_jsonl(tmp_path / "t.jsonl", [dataset.v4_row()])
    result = CliRunner().invoke(app, ["check", f"swebench:{path}", "--grading", "lenient"])
    assert result.exit_code == 2 and "neither official nor strict" in result.output
    assert "--grading" in CliRunner().invoke(app, ["serve", "--help"]).output
