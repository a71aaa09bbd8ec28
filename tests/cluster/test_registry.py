"""The cluster's registry and image-aware routing, for real: Debian's docker-registry on
loopback started by `orsbox cluster up --registry`, instance images pushed to it by
`orsbox images push`, cells on private engines that pull them through it as a mirror,
and the real HAProxy placing sessions that name their image (`X-Orsbox-Image`) by
consistent hashing, while session ids keep pinning every later request.

The instance images are the SWE-bench test image with a small random layer each
(tests/cluster/instances.py), so every episode is a real SWE-bench 5 episode."""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from orsbox.cluster.local import ClusterState, LocalCluster
from orsbox.cluster.processes import Tracked
from orsbox.cluster.pushing import push
from orsbox.cluster.registry import answers, catalog, start_on_free_port
from orsbox.cluster.router import IMAGE_HEADER
from orsbox.sandbox.config import with_backend
from orsbox.server.cells import cell_of
from tests.cluster import instances
from tests.runtimes import RUNSC_ENGINE, runtime_available
from tests.servers import ROOT, free_port
from tests.sse_client import post_sse

pytestmark = [pytest.mark.cluster, pytest.mark.docker]

BLOB_MB = 2
IMAGES = 6
PER_IMAGE = 2  # sessions per image in the routing test: 12, shuffled
ROUTER_SEES_S = 30.0  # HAProxy marks a server up after `rise` (2) checks, `inter` (2 s) apart


@pytest.fixture(scope="module")
def token() -> Iterator[str]:
    value = uuid.uuid4().hex[:10]
    yield value
    instances.remove(value)


@pytest.fixture(scope="module")
def made(token: str, test_images: list[str]) -> list[str]:
    return instances.build(token, IMAGES, BLOB_MB)


@pytest.fixture(scope="module")
def dataset_file(made: list[str]) -> Iterator[Path]:
    folder = Path(tempfile.mkdtemp(prefix="orsc-data-"))
    yield instances.write_dataset(folder / "insts.jsonl", made)
    shutil.rmtree(folder, ignore_errors=True)


def orsbox(
    *args: str, timeout: float = 300, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "orsbox.cli.main", *args],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip


# -- an episode over HTTP ----------------------------------------------------------------
def open_episode(url: str, n: int, image: str | None = None) -> str:
    """A session of instance `n`, created through `url`; with `image`, placed by it."""
    placed = {IMAGE_HEADER: image} if image else {}
    answer = httpx.post(f"{url}/create_session", headers=placed, timeout=60)
    assert answer.status_code == 200, answer.text
    sid = answer.json()["sid"]
    body = {"env_name": "insts", "task_spec": {"instance_id": instances.instance_id(n)}}
    r = httpx.post(f"{url}/create", json=body, headers={"X-Session-ID": sid}, timeout=60)
    assert r.status_code == 200, r.text
    return sid


def bash(url: str, sid: str, command: str) -> str:
    """One bash call; a 503 (setup, the pull included, still running) is asked again."""
    body = {"name": "bash", "input": {"command": command}}
    while True:
        stream = post_sse(f"{url}/insts/call", body, sid, timeout=300)
        if stream.status != 503:
            break
    assert stream.status == 200, stream.raw
    return stream.result()["output"]["blocks"][0]["text"]


def pulls(cell_url: str) -> float:
    text = httpx.get(f"{cell_url}/metrics", timeout=10).text
    line = next(x for x in text.splitlines() if x.startswith("orsbox_image_pulls_total "))
    return float(line.split()[1])


def engine_has(cluster: LocalCluster, cell: int, image: str) -> bool:
    engine = cluster.engine(cluster.cells[cell])
    return engine.docker("image", "inspect", image, check=False).returncode == 0


# -- item 1: the registry as part of a deployment ---------------------------------------
def test_cluster_up_registry_push_and_a_cell_pulls_through_it(
    dataset_file: Path, made: list[str]
) -> None:
    state = Path(tempfile.mkdtemp(prefix="orsc-", dir="/tmp")) / "state"
    port = free_port()
    target = f"swebench:{dataset_file}"
    up = orsbox(
        "cluster", "up", "1", target, "--registry", "--port", str(port), "--state", str(state)
    )
    try:
        assert up.returncode == 0, up.stderr
        url, registry_line = up.stdout.strip().splitlines()[-2:]
        assert url == f"http://127.0.0.1:{port}"
        address = registry_line.removeprefix("registry: ")
        assert answers(address)
        recorded = json.loads((state / "cluster.json").read_text())
        assert recorded["registry"] == address
        registry_process = Tracked(recorded["registry_pid"], recorded["registry_started"])
        assert registry_process.alive()
        engine_config = json.loads((Path(recorded["engines"][0]) / "daemon.json").read_text())
        assert engine_config["registry-mirrors"] == [f"http://{address}"]

        pushed = orsbox("images", "push", target, "--state", str(state))
        assert pushed.returncode == 0, pushed.stdout + pushed.stderr
        assert f"pushed {IMAGES} of {IMAGES} images to {address}" in pushed.stdout
        assert f"[1/{IMAGES}] {made[0]} -> {address}/{made[0]}" in pushed.stdout
        repositories = set(catalog(address))
        assert {name.rsplit(":", 1)[0] for name in made} <= repositories

        cluster = LocalCluster(ClusterState.load(state))
        assert not engine_has(cluster, 0, made[1])
        sid = open_episode(url, 1)
        assert bash(url, sid, "ls /blob-1 && git -C /testbed status --short | wc -l") == (
            "/blob-1\n0\n"
        )
        assert engine_has(cluster, 0, made[1])  # by its own name: pulled through the mirror
        assert pulls(cluster.cells[0].url) == 1
    finally:
        down = orsbox("cluster", "down", "--state", str(state))
        shutil.rmtree(state.parent, ignore_errors=True)
    assert down.returncode == 0, down.stderr
    assert not registry_process.alive()
    assert not state.exists()


def test_images_list_prints_every_instance_image(dataset_file: Path, made: list[str]) -> None:
    listed = orsbox("images", "list", f"swebench:{dataset_file}")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.splitlines() == made


def test_push_names_an_image_the_engine_lacks_and_fails(tmp_path: Path, made: list[str]) -> None:
    missing = f"orsbox-test/not-here-{uuid.uuid4().hex[:8]}:1"
    rows = tmp_path / "lacking.jsonl"
    instances.dataset.write_jsonl(rows, [{**instances.dataset.v5_row(missing)}])
    with tempfile.TemporaryDirectory(prefix="orsr-") as folder:
        registry = start_on_free_port(Path(folder) / "r")
        try:
            pushed = orsbox("images", "push", f"swebench:{rows}", "--registry", registry.address)
        finally:
            registry.stop()
    assert pushed.returncode == 1
    assert f"{missing}: failed: not on this engine: build, load or pull {missing}" in pushed.stdout


def test_push_goes_from_the_configured_backends_engine() -> None:
    """`orsbox images push` sends what the image store of the backend ORSBOX_BACKEND
    configures holds (here gVisor's private engine, which holds the bundled images),
    not what DOCKER_HOST's engine holds (here none answers)."""
    runtime_available("runsc")
    backend = json.dumps({"engine": RUNSC_ENGINE})
    with tempfile.TemporaryDirectory(prefix="orsr-") as folder:
        registry = start_on_free_port(Path(folder) / "r")
        try:
            pushed = orsbox(
                "images", "push", "coding", "--registry", registry.address,
                env={"ORSBOX_BACKEND": backend, "DOCKER_HOST": "unix:///nowhere.sock"},
            )  # fmt: skip
            assert pushed.returncode == 0, pushed.stdout + pushed.stderr
            assert "orsbox/base" in catalog(registry.address)
        finally:
            registry.stop()


# -- item 2: image-aware routing through the real HAProxy -------------------------------
@pytest.fixture(scope="module")
def cluster(dataset_file: Path, made: list[str]) -> Iterator[LocalCluster]:
    root = Path(tempfile.mkdtemp(prefix="orsc-", dir="/tmp"))
    settings = {"session_timeout_s": "300"}
    cluster = LocalCluster.up(
        3, free_port(), [f"swebench:{dataset_file}"], root, settings=settings, registry=True
    )
    try:
        report = with_backend(
            None, lambda backend: push(backend.images, made, cluster.state.registry, lambda _: None)
        )
        assert not report.failed, report.failed
        yield cluster
    finally:
        cluster.down()


def home_cell(url: str, image: str) -> str:
    """The cell the router places `image` on (a `/health` carrying the header)."""
    return httpx.get(f"{url}/health", headers={IMAGE_HEADER: image}, timeout=5).json()["cell"]


def test_sessions_naming_their_image_share_a_cell_and_one_pull_each(
    cluster: LocalCluster, made: list[str]
) -> None:
    order = [n for n in range(IMAGES) for _ in range(PER_IMAGE)]
    random.Random(35).shuffle(order)
    cells_of: dict[int, set[str]] = defaultdict(set)
    sessions = []
    for n in order:
        sid = open_episode(cluster.url, n, made[n])
        cells_of[n].add(str(cell_of(sid)))
        sessions.append((n, sid))
    for n, sid in sessions:  # every later request reaches the session's own cell
        assert bash(cluster.url, sid, f"ls /blob-{n}").strip() == f"/blob-{n}"
    assert all(len(cells) == 1 for cells in cells_of.values()), cells_of
    assert {n: home_cell(cluster.url, made[n]) for n in cells_of} == {
        n: next(iter(cells)) for n, cells in cells_of.items()
    }
    assert sum(pulls(c.url) for c in cluster.cells) == IMAGES
    for n, cells in cells_of.items():
        holders = {c.cell for i, c in enumerate(cluster.cells) if engine_has(cluster, i, made[n])}
        assert holders == cells
    for _, sid in sessions:
        httpx.post(f"{cluster.url}/delete", headers={"X-Session-ID": sid}, timeout=30)


def test_a_full_home_cell_moves_its_image_sessions_along_the_ring(
    cluster: LocalCluster, made: list[str]
) -> None:
    image = 0
    home = home_cell(cluster.url, made[image])
    record = next(c for c in cluster.cells if c.cell == home)
    record.process.stop(30)
    record.settings = {**record.settings, "max_sessions": "2"}
    cluster.start_cell(record)
    cluster.wait_healthy()
    # The by-image backend checks the cells on its own (`/health?room=1`), apart from
    # the placement backend `wait_healthy` watches: until it sees the restarted cell up,
    # the image's sessions go along the ring (all 4 did so once in CI).
    deadline = time.monotonic() + ROUTER_SEES_S
    while home_cell(cluster.url, made[image]) != home:
        assert time.monotonic() < deadline, f"the router's by-image backend never saw {home}"
        time.sleep(0.1)
    sessions = [open_episode(cluster.url, image, made[image]) for _ in range(4)]
    placed = Counter(str(cell_of(sid)) for sid in sessions)
    assert placed[home] == 2 and sum(placed.values()) == 4, placed
    for sid in sessions:
        assert bash(cluster.url, sid, "ls /blob-0").strip() == "/blob-0"
        httpx.post(f"{cluster.url}/delete", headers={"X-Session-ID": sid}, timeout=30)


def test_placement_without_the_header_stays_leastconn(cluster: LocalCluster) -> None:
    seen = {httpx.get(f"{cluster.url}/health", timeout=5).json()["cell"] for _ in range(30)}
    assert seen == {c.cell for c in cluster.cells}


def test_images_go_where_a_mirror_looks_and_other_registries_are_refused() -> None:
    from orsbox.cluster.registry import RegistryError, mirrored_name

    registry = "127.0.0.1:5000"
    assert mirrored_name("swebench/sweb.eval.x86_64.a_1776_b-1:latest", registry) == (
        "127.0.0.1:5000/swebench/sweb.eval.x86_64.a_1776_b-1:latest"
    )
    assert mirrored_name("ubuntu:24.04", registry) == "127.0.0.1:5000/library/ubuntu:24.04"
    assert mirrored_name("orsbox/base", registry) == "127.0.0.1:5000/orsbox/base:latest"
    with pytest.raises(RegistryError, match=r"not a Docker Hub name.*--image-map"):
        mirrored_name("ghcr.io/org/image:1", registry)
