"""Patch application as the row's harness version applies it, checked against that
version's own code: each case's repository and patch go to swebench's `run_instance`
(4.1.0 from its PyPI wheel, downloaded on first use and kept in the test cache; 5.0.2
as installed) on one container and to orsbox's `patching.apply_patch` on another, from
the same image; the two must agree on whether the patch applied and on the working tree
it left."""

from __future__ import annotations

import io
import json
import os
import re
import subprocess
import sys
import tarfile
import tempfile
import uuid
import zipfile
from concurrent.futures import ThreadPoolExecutor
from contextlib import suppress
from pathlib import Path
from typing import Any

import anyio
import docker
import pytest

from orsbox.formats.swebench import grading, patching
from orsbox.sandbox.base import Sandbox, SandboxSpec
from orsbox.sandbox.docker import DockerBackend
from tests.formats.swebench import dataset, images, patch_cases
from tests.formats.swebench.conftest import load_one
from tests.formats.swebench.patch_cases import REPO_TAR, TREE_SCRIPT, UNPACK_SCRIPT, WORKDIR

pytestmark = [pytest.mark.docker, pytest.mark.anyio]

RUNNER = Path(__file__).with_name("upstream_runner.py")
TREE = re.compile(r"^ORSBOX-TREE ([0-9a-f]{40})$", re.M)
LABELS = {"orsbox-test": "swebench-patching"}
STRATEGIES = {"4.1.0": patching.SWEBENCH_4, "5.0.2": patching.SWEBENCH_5}
V4_PATCH, V5_PATCH = patching.SWEBENCH_4.attempts[-1], patching.SWEBENCH_5.attempts[-1]
# which attempt applies each case: the cases must take the paths they are named after
APPLIED_BY = {
    ("applies only with --3way", "4.1.0"): "",
    ("applies only with --3way", "5.0.2"): "git apply --verbose --3way",
    ("--reject fails half-way", "4.1.0"): V4_PATCH,
    ("--reject fails half-way", "5.0.2"): V5_PATCH,
    ("already applied", "4.1.0"): V4_PATCH,
    ("already applied", "5.0.2"): patching.REVERSE_CHECK,
}


# 4.1.0's wheel, unpacked, kept between runs (its download and byte-compilation are
# the same every time); ORSBOX_TEST_CACHE moves it.
CACHE = Path(os.environ.get("ORSBOX_TEST_CACHE", Path.home() / ".cache" / "orsbox-tests"))


@pytest.fixture(scope="session")
def swebench_paths() -> dict[str, str]:
    """PYTHONPATH per version: 4.1.0's wheel from PyPI (through pip's configured index),
    unpacked in the test cache on first use; 5.0.2 is the installed package."""
    return {"4.1.0": str(unpacked_wheel("swebench", "4.1.0")), "5.0.2": ""}


def unpacked_wheel(name: str, version: str) -> Path:
    """`name==version`'s wheel unpacked in CACHE: downloaded when missing, moved in
    whole once unpacked, so an interrupted download is never taken for a good one."""
    folder = CACHE / f"{name}-{version}"
    if (folder / "lib" / name / "__init__.py").is_file():
        return folder / "lib"
    CACHE.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=CACHE) as scratch:
        pip = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "-d", scratch]
        subprocess.run([*pip, f"{name}=={version}"], check=True, timeout=600, capture_output=True)
        (wheel,) = Path(scratch).glob(f"{name}-{version}-*.whl")
        zipfile.ZipFile(wheel).extractall(Path(scratch) / "unpacked" / "lib")
        with suppress(OSError):  # another run unpacked it meanwhile: theirs is as good
            (Path(scratch) / "unpacked").rename(folder)
    return folder / "lib"


def _tar_of(name: str, data: bytes) -> bytes:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w") as archive:
        info = tarfile.TarInfo(name)
        info.size = len(data)
        archive.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def upstream_outcomes(
    version: str, pythonpath: str, cases: list[tuple[bytes, str]], logs: Path
) -> list[tuple[bool, str | None]]:
    """(applied, tree) per (repository tar, patch), as swebench `version`'s own
    run_instance leaves a container. A case whose run the harness's machinery cut short
    (applied, then no eval output: seen once in a loaded CI run, with no log kept) runs
    once more on a fresh container; twice cut short fails with the harness's log."""
    results = harness_run(version, pythonpath, cases, logs / "first")
    again = [n for n, result in enumerate(results) if "incomplete" in result]
    if again:
        retried = harness_run(version, pythonpath, [cases[n] for n in again], logs / "again")
        for n, result in zip(again, retried, strict=True):
            assert "incomplete" not in result, f"{version}: {result['incomplete']}"
            results[n] = result
    return [(result["applied"], result["tree"]) for result in results]


def harness_run(
    version: str, pythonpath: str, cases: list[tuple[bytes, str]], logs: Path
) -> list[dict[str, Any]]:
    """The runner's answer per case: one process, one container per case."""
    logs.mkdir()
    client = docker.from_env()
    containers = []
    try:
        for repo_tar, _ in cases:
            containers.append(_repository_container(client, repo_tar))
        jobs = [
            {"container": container.id, "patch": patch, "eval_script": TREE_SCRIPT}
            for container, (_, patch) in zip(containers, cases, strict=True)
        ]
        done = subprocess.run(
            [sys.executable, str(RUNNER)],
            input=json.dumps(jobs),
            cwd=logs,
            env={**os.environ, "PYTHONPATH": pythonpath},
            capture_output=True,
            text=True,
            timeout=1200,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        answer = json.loads(done.stdout.strip().splitlines()[-1])
        assert answer["version"] == version
        return answer["results"]
    finally:
        for container in containers:
            with suppress(docker.errors.NotFound):
                container.remove(force=True)
        client.close()


def _repository_container(client: docker.DockerClient, repo_tar: bytes) -> Any:
    """A started container of the test image with the case's repository at /testbed
    (`create`, never `run`: no pull is tried). With an init as PID 1, the harness's own
    cleanup (`docker stop --time=15`) stops it at once: a bare `sleep` as PID 1 ignores
    SIGTERM, and each case waited out the 15 s."""
    container = client.containers.create(
        images.CALC,
        ["sleep", "infinity"],
        labels=LABELS,
        network_mode="none",
        user="root",
        init=True,
    )
    container.start()
    container.put_archive("/tmp", _tar_of(Path(REPO_TAR).name, repo_tar))
    code, output = container.exec_run(["bash", "-c", UNPACK_SCRIPT])
    assert code == 0, output
    return container


@pytest.fixture(scope="session")
def upstream(
    swebench_paths: dict[str, str], tmp_path_factory: pytest.TempPathFactory, test_images: list[str]
) -> dict[tuple[str, str], tuple[bool, str | None]]:
    """Every case under every version's own code, computed once."""
    cases = [patch_cases.build(name) for name in patch_cases.BUILDERS]
    inputs = [(case.repo_tar, case.patch) for case in cases]
    per_version = each_version(swebench_paths, inputs, tmp_path_factory.mktemp("swebench"))
    return {
        (case.name, version): result
        for version, results in per_version.items()
        for case, result in zip(cases, results, strict=True)
    }


def each_version(
    swebench_paths: dict[str, str], cases: list[tuple[bytes, str]], logs: Path
) -> dict[str, list[tuple[bool, str | None]]]:
    """`upstream_outcomes` of every version, the versions at once (each is mostly its
    import and its containers' waits: 64 s one after the other), each in its own logs
    directory."""
    with ThreadPoolExecutor(len(swebench_paths)) as pool:
        futures = {}
        for version, pythonpath in swebench_paths.items():
            (logs / version).mkdir()
            futures[version] = pool.submit(
                upstream_outcomes, version, pythonpath, cases, logs / version
            )
        return {version: future.result() for version, future in futures.items()}


async def _sandbox(backend: DockerBackend, repo_tar: bytes) -> Sandbox:
    spec = SandboxSpec(image=images.CALC, labels=LABELS, session_id=uuid.uuid4().hex[:12])
    sandbox = await backend.start(spec)
    await sandbox.write_file(REPO_TAR, repo_tar)
    result = await sandbox.exec(["bash", "-c", UNPACK_SCRIPT])
    assert result.exit_code == 0, result.output
    return sandbox


async def _tree(sandbox: Sandbox) -> str:
    found = TREE.search((await sandbox.exec(["bash", "-c", TREE_SCRIPT])).output)
    assert found, "no tree"
    return found[1]


async def orsbox_outcome(backend: DockerBackend, version: str, case: patch_cases.Case):
    sandbox = await _sandbox(backend, case.repo_tar)
    try:
        applied = await patching.apply_patch(sandbox, case.patch, WORKDIR, STRATEGIES[version])
        return applied, (await _tree(sandbox)) if applied.applied else None
    finally:
        await sandbox.close()


@pytest.mark.timeout(900)  # the first one computes `upstream`: 12 containers, 2 imports
@pytest.mark.parametrize("version", STRATEGIES)
@pytest.mark.parametrize("name", patch_cases.BUILDERS)
async def test_applied_as_the_harness_version_applies_it(
    name: str, version: str, backend: DockerBackend, upstream: dict[tuple[str, str], Any]
) -> None:
    case = patch_cases.build(name)
    applied, tree = await orsbox_outcome(backend, version, case)
    assert (applied.applied, tree) == upstream[name, version], applied.output
    assert applied.strategy == f"swebench-{version}"
    assert applied.command == APPLIED_BY.get((name, version), "git apply --verbose")


async def test_agent_diff_applies_to_the_agents_tree(
    backend: DockerBackend, swebench_paths: dict[str, str], tmp_path: Path
) -> None:
    """The agent renames, deletes, makes executable and edits a binary file; the diff
    orsbox takes applied by each harness version gives the agent's own tree."""
    repo_tar = patch_cases.agent_repo_tar()
    sandbox = await _sandbox(backend, repo_tar)
    try:
        base = await grading.snapshot_tree(sandbox, WORKDIR)
        done = await sandbox.exec(["bash", "-c", patch_cases.AGENT_EDITS], cwd=WORKDIR)
        assert done.exit_code == 0, done.output
        patch = await grading.agent_patch(sandbox, WORKDIR, base)
        agents_tree = await _tree(sandbox)
    finally:
        await sandbox.close()
    per_version = await anyio.to_thread.run_sync(
        each_version, swebench_paths, [(repo_tar, patch)], tmp_path
    )
    assert per_version == {version: [(True, agents_tree)] for version in swebench_paths}


@pytest.mark.parametrize(("row", "strategy"), [("v4", "swebench-4.1.0"), ("v5", "swebench-5.0.2")])
async def test_grading_names_the_strategy(
    row: str, strategy: str, play: Any, tmp_path: Path, test_images: list[str]
) -> None:
    rows = {"v4": dataset.v4_row, "v5": lambda: dataset.v5_row(images.CALC)}
    env = load_one(dataset.write_jsonl(tmp_path / "t.jsonl", [rows[row]()]))
    instance_id = next(iter(env.tasks))
    async with play(env, instance_id) as episode:
        await episode.apply(dataset.patches().gold)
        out = await episode.submit()
    assert out.reward == 1.0, out.metadata
    assert out.metadata["patch_application"] == {
        "strategy": strategy,
        "applied": True,
        "applied_by": "git apply --verbose",
    }
