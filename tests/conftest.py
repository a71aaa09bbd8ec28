from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import docker
import pytest

from orsbox.sandbox.docker import BASE_IMAGE, ensure_base_image
from orsbox.sandbox.host import owner as L
from tests.servers import STARTED_PIDS, LiveServer, start_server
from tests.shared_use import shared_use
from tests.waiting import poll_until

# pytest-xdist's workers start with COLUMNS=80 and LINES=24 in their environment, which
# would fix the in-process rich consoles of the CLI at 80 columns when they are imported and
# reach every command a test starts: a worker runs as a plain pytest process does.
if os.environ.get("PYTEST_XDIST_WORKER"):
    os.environ.pop("COLUMNS", None)
    os.environ.pop("LINES", None)
# The openreward client's PyPI update check is network traffic this machine cannot make.
os.environ.setdefault("OPENREWARD_DISABLE_UPDATE_CHECK", "1")
# Servers the tests start record their episodes in this run's own database, not the
# user's (a test that reads episodes gives its server a database of its own). The process
# that makes its folder removes it at exit (xdist's workers inherit the controller's).
if "ORSBOX_EPISODES_DB" not in os.environ:
    _episodes = tempfile.mkdtemp(prefix="orsbox-test-episodes-")
    os.environ["ORSBOX_EPISODES_DB"] = str(Path(_episodes) / "episodes.sqlite3")
    atexit.register(shutil.rmtree, _episodes, True)

PROTOCOL_ENVS = [
    "tests/fixture_envs/protocol_envs.py:Protocol",
    "tests/fixture_envs/protocol_envs.py:Second",
]


# The test files that take longest (each well over a minute on a busy machine), handed to
# pytest-xdist's workers first (scripts/test.sh): one of them started last would keep
# the run going alone after the others are done.
LONGEST_FIRST = (
    "tests/integrations/test_harbor_environment.py",
    "tests/cluster/test_registry.py",
    "tests/formats/swebench/test_patching.py",
    "tests/integrations/test_inspect_eval.py",
    "tests/environments/test_bundled_environments.py",
    "tests/test_scale_bench.py",
    "tests/formats/harbor/test_commands.py",
    "tests/sandbox/test_shell.py",
    "tests/cluster/test_cluster.py",
    "tests/adversarial/test_schema_fuzz.py",
    "tests/sandbox/test_image_cache_docker.py",
    "tests/formats/harbor/test_episodes.py",
    "tests/environments/test_readme_quick_start.py",
)


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest files first, the rest in their order (a stable sort); then the tests
    marked `full_matrix` (the rest of a slow matrix, or the longer run of a slow
    test, whose CI-sized part always runs) or `trl` (a real GRPOTrainer run,
    docs/train-with-trl.md) are skipped unless asked for: `pytest -m full_matrix`,
    `pytest -m trl`."""
    rank = {path: n for n, path in enumerate(LONGEST_FIRST)}
    items.sort(key=lambda item: rank.get(item.nodeid.split("::")[0], len(rank)))
    asked = config.getoption("markexpr") or ""
    for marker in ("full_matrix", "trl"):
        if marker in asked:
            continue
        skip = pytest.mark.skip(reason=f"only when asked for: pytest -m {marker}")
        for item in items:
            if marker in item.keywords:
                item.add_marker(skip)


@pytest.fixture(scope="module")
def protocol_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """One real server per test module, with short timeouts that tests can observe. Its
    operator named the default environment, so requests naming none (bare paths, a
    `/create` without `env_name`) reach `protocol`; tests/test_owners.py serves the
    same two environments without one."""
    tmp = tmp_path_factory.mktemp("server")
    server = start_server(
        PROTOCOL_ENVS,
        tmp,
        default_environment="protocol",
        session_timeout_s=4,
        reap_interval_s=0.5,
        setup_wait_s=1.5,
        result_linger_s=3,
        max_body_bytes=1_000_000,
    )
    yield server
    server.stop()


@pytest.fixture
def tmp(tmp_path: Path) -> Path:
    return tmp_path


# -- Docker ------------------------------------------------------------------------------
LEFTOVER_WAIT_S = 10.0


@pytest.fixture(scope="session")
def docker_client() -> Iterator[docker.DockerClient]:
    try:
        client = docker.from_env(timeout=60)
        client.ping()
    except docker.errors.DockerException as e:
        pytest.fail(f"no Docker engine answers (start one with scripts/start-docker.sh): {e}")
    yield client
    client.close()


@pytest.fixture(scope="session")
def base_image(docker_client: docker.DockerClient) -> str:
    ensure_base_image(docker_client)
    return BASE_IMAGE


@pytest.fixture(scope="session")
def test_images(base_image: str, tmp_path_factory: pytest.TempPathFactory) -> Iterator[list[str]]:
    """The SWE-bench test images (tests/formats/swebench/images.py; the registry tests'
    instance images are built on them): built (from the engine's cache) by each pytest
    process that needs them, removed by the last of the run to finish with them."""
    from tests.formats.swebench import images

    tags: list[str] = []
    with shared_use("swebench-test-images", tmp_path_factory, lambda: images.remove_all(tags)):
        tags += images.build_all()  # counted first: no other process removes them now
        yield tags


@pytest.fixture(autouse=True, scope="session")
def bench_logs_in_a_temporary_folder(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[None]:
    """The benches the tests run (in process or as `python -m bench...`) write their
    servers' logs under pytest's temporary folder, not /tmp/orsbox-bench-PID."""
    folder = tmp_path_factory.mktemp("bench-logs")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("ORSBOX_BENCH_LOG_DIR", str(folder))
        yield


@pytest.fixture(autouse=True)
def no_leftover_containers(request: pytest.FixtureRequest) -> Iterator[None]:
    """After every Docker test: no orsbox-labelled container it started may remain.
    (Compared with a snapshot, so containers of a module's server are not blamed.)"""
    if request.node.get_closest_marker("docker") is None:
        yield
        return
    docker_client = request.getfixturevalue("docker_client")

    def labelled() -> set[str]:
        """Containers owned by this test process or a server it started: other runs
        sharing the engine start and remove theirs meanwhile. (The low-level list:
        `containers.list` inspects each one, which races with those removals.)"""
        ours = {str(pid) for pid in {os.getpid(), *STARTED_PIDS}}
        containers = docker_client.api.containers(all=True, filters={"label": "orsbox=1"})
        return {c["Id"] for c in containers if (c.get("Labels") or {}).get(L.PID) in ours}

    before = labelled()
    yield
    poll_until(lambda: not (labelled() - before), LEFTOVER_WAIT_S, interval_s=0.2)
    left = labelled() - before
    for container_id in left:
        with contextlib.suppress(docker.errors.NotFound):
            docker_client.api.remove_container(container_id, force=True)
    assert not left, f"containers left behind: {sorted(left)}"
