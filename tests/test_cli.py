"""The command line where no Docker engine is needed: clear errors for a stopped engine,
a broken manifest and a broken actions file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from orsbox.settings import Settings
from tests.servers import ROOT


def orsbox(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orsbox.cli.main", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "COLUMNS": "300", **(env or {})},
    )


def test_doctor_reports_a_stopped_engine() -> None:
    done = orsbox("doctor", env={"DOCKER_HOST": "tcp://127.0.0.1:9"})
    assert done.returncode == 1
    assert "FAIL Docker engine: no Docker engine answers at tcp://127.0.0.1:9" in done.stdout
    assert "bash scripts/start-docker.sh" in done.stdout and "DOCKER_HOST" in done.stdout


def test_serve_names_the_broken_manifest(tmp_path: Path) -> None:
    (tmp_path / "orsbox.toml").write_text('name = "x"\nprompt = "p"\ntools = ["bsh"]\n')
    done = orsbox("serve", str(tmp_path))
    assert done.returncode == 2
    assert "orsbox.toml" in done.stderr and "unknown tool 'bsh'" in done.stderr


def test_run_names_the_bad_actions_line(tmp_path: Path) -> None:
    actions = tmp_path / "actions.jsonl"
    actions.write_text('{"name": "submit", "input": {"answer": "7"}}\n{"input": {}}\n')
    done = orsbox("run", "math", "--actions", str(actions))
    assert done.returncode == 2
    assert "actions.jsonl:2" in done.stderr


def test_run_plays_a_python_environment_in_process() -> None:
    done = orsbox("run", "math", "--actions", "environments/math/examples/train-0-wrong.jsonl")
    assert done.returncode == 0, done.stderr
    assert "muffins" in done.stdout and "Incorrect." in done.stdout
    assert "7" not in done.stdout.split("call 1:", 1)[1]  # the answer is not given away
    assert done.stdout.rstrip().endswith("final reward: 0.0  finished: true")


def test_dataset_options_reach_the_format_loader() -> None:
    """`serve`, `run` and `build` share the dataset options: one model, checked once."""
    from orsbox.cli.dataset_options import format_options

    options = format_options(
        name="bench",
        image_map=["ubuntu:24.04=orsbox/debian:bookworm"],
        instances=["a__b-1,c__d-2", "e__f-3"],
        tools="bash, read_file",
        memory="2g",
    )
    assert options.name == "bench" and options.memory_bytes == 2 * 1024**3
    assert options.instances == ("a__b-1", "c__d-2", "e__f-3")
    assert options.tools == ("bash", "read_file")
    assert options.image_map.rewrite("ubuntu:24.04") == "orsbox/debian:bookworm"


def test_instance_ids_from_a_file(tmp_path: Path) -> None:
    from orsbox.formats.options import read_instance_ids

    ids = tmp_path / "ids.txt"
    ids.write_text("a__b-1\n# a comment\n\nc__d-2  # trailing\n")
    assert read_instance_ids([f"@{ids}", "x__y-9"]) == ("a__b-1", "c__d-2", "x__y-9")


def test_bad_dataset_options_are_named() -> None:
    for command in ("serve", "build"):
        done = orsbox(command, "swebench:rows.jsonl", "--image-map", "nonsense")
        assert done.returncode == 2 and "'nonsense' is not FROM=TO" in done.stderr, done.stderr
    done = orsbox("run", "swebench:rows.jsonl", "--actions", "a.jsonl", "--memory", "lots")
    assert done.returncode == 2 and "memory 'lots'" in done.stderr, done.stderr


@pytest.mark.parametrize("flag", ["--setup-snapshots", "--prepared"])
def test_gc_takes_the_setup_snapshots_flag_by_its_former_name_too(flag: str) -> None:
    done = orsbox("gc", flag, env={"DOCKER_HOST": "tcp://127.0.0.1:9"})
    assert done.returncode != 2 and "No such option" not in done.stderr, done.stderr


def test_settings_read_the_setup_snapshot_bounds_by_their_former_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("ORSBOX_PREPARED_CACHE_MAX_ENTRIES", "3")
    monkeypatch.setenv("ORSBOX_SETUP_SNAPSHOTS_MAX_BYTES", "5")
    settings = Settings()
    assert (settings.setup_snapshots_max_entries, settings.setup_snapshots_max_bytes) == (3, 5)
    assert Settings(prepared_cache_max_entries=4).setup_snapshots_max_entries == 4
