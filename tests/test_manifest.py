"""Manifest environments without Docker: loading, every kind of broken manifest, and
what the loader makes of a good one."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from orsbox.authoring.declarative import DeclarativeEnvironment, manifest_environment
from orsbox.authoring.loading import load_environment
from orsbox.authoring.manifest import LimitsConfig, parse_size
from orsbox.errors import ManifestError

GOOD = """
name = "demo"
prompt = "Reverse {word}."
tools = ["bash", "read_file"]

[[splits]]
name = "train"
tasks = "tasks.jsonl"

[limits]
memory = "256m"
timeout_s = 5

[grader]
command = "test \\"$ORSBOX_ANSWER\\" = \\"$ORSBOX_TASK_EXPECTED\\""
submit_params = { answer = "the reversed word" }
"""
TASKS = '{"word": "abc", "expected": "cba"}\n{"word": "xy", "expected": "yx"}\n'


def make(tmp: Path, manifest: str = GOOD, tasks: str = TASKS) -> Path:
    (tmp / "orsbox.toml").write_text(textwrap.dedent(manifest))
    (tmp / "tasks.jsonl").write_text(tasks)
    return tmp


def error(tmp: Path, manifest: str = GOOD, tasks: str = TASKS) -> str:
    with pytest.raises(ManifestError) as caught:
        manifest_environment(make(tmp, manifest, tasks))
    return str(caught.value)


def test_a_good_manifest_becomes_an_environment(tmp: Path) -> None:
    env = manifest_environment(make(tmp))
    assert issubclass(env, DeclarativeEnvironment) and env.name() == "demo"
    assert env.image == "orsbox/base:latest" and env.limits.memory_bytes == 256 * 1024**2
    assert env.exec_timeout_s == 5 and env.limits.network is False
    assert [s.model_dump() for s in env.list_splits()] == [{"name": "train", "type": "train"}]
    assert env.list_tasks("train")[1] == {"word": "xy", "expected": "yx"}
    specs = {t.name: t for t in env.list_tools().tools}
    assert sorted(specs) == ["bash", "read_file", "submit"]
    assert specs["submit"].input_schema["required"] == ["answer"]
    assert specs["submit"].input_schema["properties"]["answer"]["description"] == (
        "the reversed word"
    )
    assert env({"word": "abc"}).get_prompt()[0].text == "Reverse abc."


def test_loading_a_folder_or_its_manifest_by_reference(tmp: Path) -> None:
    make(tmp)
    assert load_environment(str(tmp))[0].name() == "demo"
    assert load_environment(str(tmp / "orsbox.toml"))[0].name() == "demo"


def test_grader_environment_variables(tmp: Path) -> None:
    env = manifest_environment(make(tmp))
    variables = env.grader.env(
        {"id": 3, "word": "abc", "nested": {"a": 1}}, {"answer": "cba"}, "submit"
    )
    assert variables["ORSBOX_ANSWER"] == "cba" and variables["ORSBOX_TASK_WORD"] == "abc"
    assert variables["ORSBOX_TASK_ID"] == "3" and "ORSBOX_TASK_NESTED" not in variables
    assert json.loads(variables["ORSBOX_TASK"])["nested"] == {"a": 1}
    assert variables["ORSBOX_EVENT"] == "submit" and variables["ORSBOX_GRADER_DIR"] == "/grader"


def test_missing_grader(tmp: Path) -> None:
    manifest = GOOD[: GOOD.index("[grader]")]
    message = error(tmp, manifest)
    assert str(tmp / "orsbox.toml") in message
    assert "grader: missing: every environment needs a [grader] table" in message


def test_unknown_tool(tmp: Path) -> None:
    message = error(tmp, GOOD.replace('"read_file"', '"bsh"'))
    assert "orsbox.toml: tools: unknown tool 'bsh'" in message
    assert "bash, edit_file, list_dir, python, read_file, write_file" in message


def test_unknown_fields_name_what_is_allowed(tmp: Path) -> None:
    message = error(tmp, GOOD.replace('memory = "256m"', 'memroy = "256m"'))
    assert (
        "limits.memroy: unknown field; allowed here: allowed_hosts, cap_add, cpus, disk" in message
    )
    message = error(tmp, GOOD.replace('name = "demo"', 'name = "demo"\nimage_name = "x"'))
    assert "image_name: unknown field; allowed here: build, description, env, grader" in message
    message = error(tmp, GOOD.replace('tasks = "tasks.jsonl"', 'tasks = "tasks.jsonl"\nsize = 3'))
    assert "splits[0].size: unknown field; allowed here: name, tasks, type" in message


def test_missing_split_file(tmp: Path) -> None:
    message = error(tmp, GOOD.replace("tasks.jsonl", "nope.jsonl"))
    assert f"splits[0].tasks: no such file: {tmp / 'nope.jsonl'}" in message


def test_bad_jsonl_line(tmp: Path) -> None:
    message = error(tmp, tasks='{"word": "a", "expected": "a"}\n\n{"word": oops}\n')
    assert f"{tmp / 'tasks.jsonl'}:3: invalid JSON" in message
    message = error(tmp, tasks='["not", "an", "object"]\n')
    assert "tasks.jsonl:1: a task must be a JSON object, not list" in message


def test_a_task_without_a_prompt_field(tmp: Path) -> None:
    message = error(tmp, tasks='{"word": "a"}\n{"expected": "b"}\n')
    assert "prompt:" in message and "task 1" in message
    assert "task field 'word', which the task does not have (its fields: expected)" in message


def test_a_created_task_without_a_prompt_field(tmp: Path) -> None:
    env = manifest_environment(make(tmp))
    with pytest.raises(ManifestError, match="task field 'word'"):
        env({"other": 1})


def test_invalid_toml_names_the_line(tmp: Path) -> None:
    message = error(tmp, GOOD.replace('name = "demo"', "name = demo"))
    assert str(tmp / "orsbox.toml") in message and "invalid TOML" in message and "line 2" in message


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        (('memory = "256m"', 'memory = "lots"'), "limits.memory: 'lots' is not a size"),
        (('name = "demo"', 'name = "Demo Env"'), "name: String should match pattern"),
        (('["bash", "read_file"]', '["bash", "submit"]'), "submit is always there"),
        (("answer = ", "task_id = "), "'task_id' is not a valid parameter name"),
        (('name = "train"', 'name = "train"\ntype = "dev"'), "splits[0].type: Input should be"),
    ],
)
def test_field_problems(tmp: Path, change: tuple[str, str], expected: str) -> None:
    assert expected in error(tmp, GOOD.replace(*change))


def test_paths_a_manifest_names_must_exist(tmp: Path) -> None:
    manifest = GOOD.replace("[grader]", '[setup]\ncopy = { "files" = "/workspace" }\n\n[grader]')
    assert "setup.copy.'files': no such folder" in error(tmp, manifest)
    assert "grader.files: no such folder" in error(
        tmp, GOOD.replace("[grader]", '[grader]\nfiles = "hidden"')
    )


def test_parquet_tasks(tmp: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.Table.from_pylist([{"word": "abc", "expected": "cba"}]), tmp / "t.parquet")
    env = manifest_environment(make(tmp, GOOD.replace("tasks.jsonl", "t.parquet")))
    assert env.list_tasks("train") == [{"word": "abc", "expected": "cba"}]


def test_image_defaults(tmp: Path) -> None:
    (tmp / "Dockerfile").write_text("ARG BASE_IMAGE\nFROM ${BASE_IMAGE}\n")
    built = manifest_environment(make(tmp, GOOD + '\n[build]\nbase_image = "orsbox/swe:latest"\n'))
    assert built.image == "orsbox/env-demo:latest"
    assert manifest_environment(tmp, image="me/x:1").image == "me/x:1"


def test_sizes() -> None:
    assert parse_size("512m") == 512 * 1024**2 and parse_size("2GiB") == 2 * 1024**3
    assert parse_size("1.5g") == int(1.5 * 1024**3) and parse_size(1000) == 1000
    with pytest.raises(ValueError):
        parse_size("0m")


def test_disk_limit() -> None:
    limits = LimitsConfig(disk="64m").sandbox_limits(Path("."))
    assert limits.disk_bytes == 64 * 1024**2
    assert LimitsConfig().sandbox_limits(Path(".")).disk_bytes is None


def test_mounts_privileges_and_network(tmp: Path) -> None:
    (tmp / "data").mkdir()
    config = LimitsConfig.model_validate(
        {
            "network": "host",
            "privileged": True,
            "cap_add": ["NET_ADMIN"],
            "mounts": [{"source": "data", "target": "/data"}],
        }
    )
    limits = config.sandbox_limits(tmp)
    assert limits.network == "host" and limits.privileged and limits.cap_add == ("NET_ADMIN",)
    (mount,) = limits.mounts
    assert mount.source == str((tmp / "data").resolve()) and mount.target == "/data"
    assert mount.read_only


def test_an_allow_listed_network(tmp: Path) -> None:
    allow = 'timeout_s = 5\nnetwork = "allowlist"\nallowed_hosts = ["pypi.org", "*.debian.org"]'
    env = manifest_environment(make(tmp, GOOD.replace("timeout_s = 5", allow)))
    assert env.limits.network == "allowlist"
    assert env.limits.allowed_hosts == ("pypi.org", "*.debian.org")
    message = error(tmp, GOOD.replace("timeout_s = 5", 'allowed_hosts = ["pypi.org"]'))
    assert 'allowed_hosts needs network = "allowlist"' in message, message
    bad = 'network = "allowlist"\nallowed_hosts = ["https://pypi.org/simple"]'
    message = error(tmp, GOOD.replace("timeout_s = 5", bad))
    assert "is not a host name" in message, message


def test_a_mount_source_must_exist_and_its_target_be_absolute(tmp: Path) -> None:
    mount = 'timeout_s = 5\nmounts = [{ source = "nowhere", target = "%s" }]'
    message = error(tmp, GOOD.replace("timeout_s = 5", mount % "/data"))
    assert "limits.mounts[0].source: no such path" in message, message
    (tmp / "nowhere").mkdir()
    env = manifest_environment(make(tmp, GOOD.replace("timeout_s = 5", mount % "/data")))
    assert env.limits.mounts[0].source == str((tmp / "nowhere").resolve())
    message = error(tmp, GOOD.replace("timeout_s = 5", mount % "data"))
    assert "limits.mounts[0].target: must be an absolute path" in message, message


def test_bundled_manifests_load() -> None:
    root = Path(__file__).resolve().parent.parent / "environments"
    coding, swe, terminal = (manifest_environment(root / n) for n in ("coding", "swe", "terminal"))
    assert coding.image == terminal.image == "orsbox/base:latest"
    assert swe.image == "orsbox/env-swe:latest" and swe.workdir == "/workspace/repo"
    assert [t.name for t in swe.list_tools().tools] == [
        "bash", "edit_file", "read_file", "submit", "write_file",
    ]  # fmt: skip
    for env in (coding, swe, terminal):
        assert env.list_tasks("train") and env.list_tasks("test")
