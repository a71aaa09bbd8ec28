"""gVisor from nothing (issue 50), the way docs/gvisor.md sets it up: a private runsc
engine of this module's own (scripts/start-runsc-engine.sh with its own socket,
data-root, exec-root, pid file and bridge) whose image store is empty, then `orsbox
serve --engine ... --runtime runsc` on it. The engine's bridge does no NAT, so its
builds reach no network: the server builds what is missing on the main engine (in CI
it is already there, from scripts/test.sh) and copies it in. Then the bundled
examples play to 1.0 and 0.0 through `orsbox run --url`, and the hostile calls of the
gVisor suite (orphans, a fork bomb, memory bombs; tests/adversarial/test_processes.py
and test_under_gvisor.py) run on that server with `/health` asked every 0.25 s
throughout. Where no engine can build, the server's last line names the cause.

The engine, its folder and its bridge are removed afterwards (found by its own pid file
and folder, never by a process name), and so is one a killed run left behind. What the module costs is mostly the copy
(orsbox/base and orsbox/env-swe, about 1 GB: 15 s on an idle machine)."""

from __future__ import annotations

import contextlib
import ipaddress
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import docker
import httpx
import pytest

from bench.servers import ROOT, free_port, spawn_server, wait_healthy
from orsbox.bundle import bundled_targets
from tests.adversarial import test_processes
from tests.adversarial import test_under_gvisor as under_gvisor
from tests.containers.conftest import Episode, open_episode
from tests.environments.conftest import example, orsbox
from tests.servers import STARTED_PIDS, LiveServer

# the first test waits for the copy (or, run alone on a machine without the images, for
# their build on the main engine)
pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

HOSTILE = ["tests/adversarial/envs.py:Hostile", "tests/adversarial/envs.py:Roomy"]
START_TIMEOUT_S = 900  # images missing on the main engine too are built there first
HEALTH_EVERY_S = 0.25
HEALTH_SLOW_S = 5.0  # /health bounds its own engine probe at 5 s


@dataclass
class FreshEngine:
    """A private runsc engine started for this module, and what identifies it."""

    root: Path
    address: str
    pidfile: Path
    bridge: str
    env: dict[str, str]

    def client(self) -> docker.DockerClient:
        return docker.DockerClient(base_url=self.address, timeout=60)


def free_bridge_cidr() -> str:
    """A /24 of 198.18.200-249 that no route of this host uses (the shared runsc
    engine's bridge is 198.18.254.1/24; a cluster's cells hash theirs)."""
    routes = subprocess.run(["ip", "-4", "route"], capture_output=True, text=True).stdout
    used = []
    for word in routes.split():
        with contextlib.suppress(ValueError):
            used.append(ipaddress.ip_network(word, strict=False))
    for third in range(200, 250):
        net = ipaddress.ip_network(f"198.18.{third}.0/24")
        if not any(net.overlaps(other) for other in used):
            return f"198.18.{third}.1/24"
    raise AssertionError("no free /24 in 198.18.200-249 for the fresh engine's bridge")


def started_at(pid: int) -> str | None:
    """The process's start time (clock ticks since boot), None when there is none: with
    its pid, what tells it from a later process given the same pid."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[19]
    except (OSError, IndexError):
        return None


def engine_at(root: Path) -> FreshEngine:
    """The fresh engine whose folder is `root` (its bridge named in its daemon.json)."""
    config = (
        json.loads((root / "daemon.json").read_text()) if (root / "daemon.json").exists() else {}
    )
    return FreshEngine(
        root=root,
        address=f"unix://{root}/docker.sock",
        pidfile=root / "dockerd.pid",
        bridge=config.get("bridge") or f"orsbox-f{root.name.rsplit('-', 1)[-1][:6]}",
        env={},
    )


def sweep_orphaned_engines() -> None:
    """Fresh engines whose test process is gone (killed before its teardown): each folder
    names its owner (pid and start time) in `owner`; one whose owner no longer runs is
    stopped and removed. Those of runs still going are left alone."""
    for root in Path("/tmp").glob("orsbox-fresh-*"):
        with contextlib.suppress(OSError, ValueError):
            pid, start = (root / "owner").read_text().split()
            if started_at(int(pid)) != start:
                stop_fresh_engine(engine_at(root))


def start_fresh_engine() -> FreshEngine:
    sweep_orphaned_engines()
    root = Path(tempfile.mkdtemp(prefix="orsbox-fresh-", dir="/tmp"))  # short: socket paths
    (root / "owner").write_text(f"{os.getpid()} {started_at(os.getpid())}")
    engine = engine_at(root)
    engine.env = {
        **os.environ,
        "ORSBOX_RUNSC_SOCKET": f"{root}/docker.sock",
        "ORSBOX_RUNSC_PIDFILE": str(engine.pidfile),
        "ORSBOX_RUNSC_ROOT": str(root),
        "ORSBOX_RUNSC_BRIDGE": engine.bridge,
        "ORSBOX_RUNSC_BRIDGE_CIDR": free_bridge_cidr(),
        "ORSBOX_RUNSC_IMAGES": " ",  # copy nothing: the store starts empty
    }
    script = ROOT / "scripts" / "start-runsc-engine.sh"
    started = subprocess.run(
        ["bash", str(script)], env=engine.env, capture_output=True, text=True, timeout=300
    )
    if started.returncode != 0:
        stop_fresh_engine(engine)
        raise AssertionError(f"start-runsc-engine.sh failed: {started.stderr}")
    return engine


def stop_fresh_engine(engine: FreshEngine) -> None:
    """Stop the engine by its pid file, then what can outlive it (as scripts/test.sh
    does for the shared one): a shim found by this engine's own containerd socket in
    its command line, runsc's records, the network namespace mount; then its folder
    and its bridge."""
    with contextlib.suppress(FileNotFoundError, ValueError, ProcessLookupError):
        pid = int(engine.pidfile.read_text())
        os.kill(pid, signal.SIGTERM)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            os.kill(pid, 0)  # ProcessLookupError once it is gone
            time.sleep(0.2)
    containerd = f"-address {engine.root}/exec/containerd/containerd.sock"
    shims = subprocess.run(["pgrep", "-f", "--", containerd], capture_output=True, text=True)
    for shim in shims.stdout.split():
        with contextlib.suppress(ProcessLookupError):
            os.kill(int(shim), signal.SIGKILL)
    runsc_root = f"{engine.root}/exec/runtime-runc/moby"
    listed = subprocess.run(["runsc", "--root", runsc_root, "list"], capture_output=True, text=True)
    for line in listed.stdout.splitlines()[1:]:
        argv = ["runsc", "--root", runsc_root, "delete", "--force", line.split()[0]]
        subprocess.run(argv, capture_output=True)
    subprocess.run(["umount", f"{engine.root}/exec/netns/default"], capture_output=True)
    shutil.rmtree(engine.root, ignore_errors=True)
    subprocess.run(["ip", "link", "del", engine.bridge], capture_output=True)
    assert not engine.root.exists(), f"{engine.root} is still there"


@pytest.fixture(scope="module")
def fresh_engine() -> Iterator[FreshEngine]:
    engine = start_fresh_engine()  # the script installs runsc where it is missing
    try:
        client = engine.client()
        try:
            assert "runsc" in client.info()["Runtimes"]
            assert client.api.images(all=True) == [], "the fresh engine's store is not empty"
        finally:
            client.close()
        yield engine
    finally:
        stop_fresh_engine(engine)


def serve(engine: FreshEngine, folder: Path, targets: list[str]) -> LiveServer:
    """`orsbox serve --engine ENGINE --runtime runsc TARGETS`, as docs/gvisor.md runs it
    (the episode database kept in `folder`, for the OOM check's record)."""
    port = free_port()
    log_path = folder / f"server-{port}.log"
    argv = ["-m", "orsbox.cli.main", "serve", *targets, "--port", str(port)]
    argv += ["--engine", engine.address, "--runtime", "runsc"]
    server_id = f"test-fresh-{uuid.uuid4().hex[:12]}"
    settings = {
        "server_id": server_id,
        "setup_wait_s": 60,
        "episodes_db": folder / "episodes.sqlite3",
    }
    process = spawn_server(argv, log_path, ROOT, **settings)
    STARTED_PIDS.add(process.pid)
    server = LiveServer(f"http://127.0.0.1:{port}", process, log_path, server_id)
    wait_healthy(server.url, process, log_path, START_TIMEOUT_S)
    return server


@pytest.fixture(scope="module")
def fresh_server(
    fresh_engine: FreshEngine, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[LiveServer]:
    """The bundled environments (and the hostile ones) served on the fresh engine: the
    images they need arrive by a copy from the main engine, not by a build there."""
    started = time.monotonic()
    server = serve(fresh_engine, tmp_path_factory.mktemp("fresh"), [*bundled_targets(), *HOSTILE])
    log = server.log()
    print(f"served from an empty store in {time.monotonic() - started:.1f} s:\n{log}")
    assert "reach no network: its default bridge" in log and "copied in" in log, log
    assert "Copied orsbox/base:latest, orsbox/env-swe:latest in" in log, log
    yield server
    server.stop()
    client = fresh_engine.client()
    try:
        mine = {"label": f"orsbox.server={server.server_id}"}
        assert client.api.containers(all=True, filters=mine) == [], "the server left containers"
    finally:
        client.close()


EXAMPLES = [
    (env, kind, reward)
    for env in ("math", "coding", "swe", "terminal")
    for kind, reward in (("correct", 1.0), ("wrong", 0.0))
]


@pytest.mark.parametrize(("env", "kind", "reward"), EXAMPLES)
def test_each_bundled_example_plays_to_its_reward(
    fresh_server: LiveServer, env: str, kind: str, reward: float
) -> None:
    actions = str(example(env, f"train-0-{kind}"))
    done = orsbox("run", env, "--actions", actions, "--url", fresh_server.url)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.rstrip().endswith(f"final reward: {reward}  finished: true"), done.stdout


@contextlib.contextmanager
def health_answering(url: str) -> Iterator[list[tuple[int | None, str, float]]]:
    """Ask `url`/health every `HEALTH_EVERY_S` while the block runs; afterwards every
    answer must be 200 `ok` within `HEALTH_SLOW_S`. Yields the answers: (status code,
    status or error, seconds)."""
    answers: list[tuple[int | None, str, float]] = []
    done = threading.Event()

    def ask() -> None:
        while not done.is_set():
            started = time.monotonic()
            try:
                answer = httpx.get(f"{url}/health", timeout=30)
                status = str(answer.json().get("status"))
                answers.append((answer.status_code, status, time.monotonic() - started))
            except (httpx.HTTPError, ValueError) as e:
                answers.append((None, repr(e), time.monotonic() - started))
            done.wait(HEALTH_EVERY_S)

    asker = threading.Thread(target=ask, daemon=True)
    asker.start()
    try:
        yield answers
    finally:
        done.set()
        asker.join(timeout=60)
    bad = [a for a in answers if a[:2] != (200, "ok") or a[2] > HEALTH_SLOW_S]
    assert len(answers) >= 2 and not bad, f"{len(answers)} answers, these not ok in time: {bad}"


def fork_bomb_ends_and_the_session_is_kept(server: LiveServer, ep: Episode) -> None:
    """The bomb's call times out, the bomb is gone, and the same shell answers (in the
    Roomy sandbox: RLIMIT_NPROC stops the bomb before its memory ends the sandbox)."""
    stream = ep.call("bash", command=":(){ :|:& };:; sleep 30", timeout=5)
    meta = stream.result()["output"]["metadata"]  # an error event (sandbox gone) fails here
    assert meta["timed_out"] is True, meta
    text, _ = ep.bash("unset -f :; (echo forked); echo $((6 * 7))")
    assert text.endswith("forked\n42\n"), text
    assert test_processes.strays(ep) == []


def orphans(server: LiveServer, ep: Episode) -> None:
    test_processes.test_orphans_never_hold_a_call_and_die_with_their_shell(ep)


def memory_bomb(server: LiveServer, ep: Episode) -> None:
    under_gvisor.test_a_memory_bomb_fails_inside_and_the_session_answers(ep)


def processes_together_past_the_memory(server: LiveServer, ep: Episode) -> None:
    under_gvisor.test_processes_that_together_pass_the_memory_are_killed_and_the_session_answers(
        server, ep
    )


HOSTILE_CALLS: list[tuple[str, Callable[[LiveServer, Episode], None]]] = [
    ("roomy", fork_bomb_ends_and_the_session_is_kept),
    ("hostile", orphans),
    ("hostile", memory_bomb),
    ("hostile", processes_together_past_the_memory),
]


@pytest.mark.parametrize(
    ("env", "check"), HOSTILE_CALLS, ids=[check.__name__ for _, check in HOSTILE_CALLS]
)
def test_hostile_calls_with_health_answering(
    fresh_server: LiveServer, env: str, check: Callable[[LiveServer, Episode], None]
) -> None:
    ep = open_episode(fresh_server, env)
    try:
        with health_answering(fresh_server.url):
            check(fresh_server, ep)
    finally:
        ep.delete()


def built_environment(folder: Path, step: str) -> tuple[Path, str]:
    """A manifest environment in `folder` whose image (a fresh tag) is built from
    orsbox/base by one `RUN step`; its grader gives 1.0 when /made-by-the-build is
    there. (Its folder, its image's tag.)"""
    tag = f"orsbox-test/fresh-{uuid.uuid4().hex[:12]}:latest"
    (folder / "tasks").mkdir(parents=True)
    (folder / "tasks" / "train.jsonl").write_text('{"id": "t0"}\n')
    (folder / "Dockerfile").write_text(
        f"ARG BASE_IMAGE=orsbox/base:latest\nFROM ${{BASE_IMAGE}}\nUSER root\nRUN {step}\n"
    )
    (folder / "orsbox.toml").write_text(
        f'name = "built"\nimage = "{tag}"\nprompt = "submit"\n[build]\ndockerfile = "Dockerfile"\n'
        '[[splits]]\nname = "train"\ntasks = "tasks/train.jsonl"\n'
        '[grader]\ncommand = "test -f /made-by-the-build"\n'
    )
    return folder, tag


def orsbox_on(engine: FreshEngine, *args: str, **env: str) -> subprocess.CompletedProcess[str]:
    """An orsbox command with `--engine ENGINE --runtime runsc` (and `env` set)."""
    argv = [sys.executable, "-m", "orsbox.cli.main", *args]
    argv += ["--engine", engine.address, "--runtime", "runsc"]
    environ = {**os.environ, **env}
    return subprocess.run(argv, cwd=ROOT, env=environ, capture_output=True, text=True, timeout=300)


def test_an_image_missing_on_both_engines_is_built_on_the_main_one_and_copied(
    fresh_engine: FreshEngine, fresh_server: LiveServer, tmp_path: Path
) -> None:
    """`orsbox run` in-process on the fresh engine: the environment's image, on neither
    engine, is built on the main engine and copied in, and its episode runs from it
    under gVisor (the grader finds the build's file). The tag is removed from both."""
    folder, tag = built_environment(tmp_path / "env", "touch /made-by-the-build")
    actions = tmp_path / "actions.jsonl"
    actions.write_text('{"name": "submit", "input": {}}\n')
    main = docker.from_env(timeout=120)
    try:
        done = orsbox_on(fresh_engine, "run", str(folder), "--actions", str(actions))
        output = done.stdout + done.stderr
        assert done.returncode == 0, output
        assert f"Building 1 missing image(s) there: {tag}" in output, output
        assert f"Copied {tag} in" in output, output
        assert done.stdout.rstrip().endswith("final reward: 1.0  finished: true"), output
    finally:
        with contextlib.suppress(docker.errors.ImageNotFound):
            main.images.remove(tag)
        main.close()
        fresh = fresh_engine.client()
        with contextlib.suppress(docker.errors.ImageNotFound):
            fresh.images.remove(tag)
        fresh.close()


def test_with_no_engine_to_build_on_the_last_line_names_the_cause(
    fresh_engine: FreshEngine, fresh_server: LiveServer, tmp_path: Path
) -> None:
    """With no local engine to build on (DOCKER_HOST at nothing), an environment whose
    image must be built on the fresh engine, by a step that needs the network: `orsbox
    serve` exits 1 and its last line names the cause. (After `fresh_server`, which
    copied orsbox/base in.)"""
    resolve = "import socket; socket.getaddrinfo('deb.debian.org', 80)"
    # the resolver asked once, for a second (10 s by default)
    step = f"RES_OPTIONS='timeout:1 attempts:1' python3 -c \"{resolve}\""
    folder, tag = built_environment(tmp_path / "env", step)
    no_engine = f"unix://{tmp_path}/no-engine.sock"
    done = orsbox_on(
        fresh_engine, "serve", str(folder), "--port", str(free_port()), DOCKER_HOST=no_engine
    )
    output = done.stdout + done.stderr
    assert done.returncode == 1, output
    last = output.rstrip().splitlines()[-1]
    assert last.startswith(f"error: {tag} could not be built: "), output
    assert f"build steps on the engine at {fresh_engine.address} reach no network" in last, last
    assert "does no NAT" in last and "no local engine answers" in last, last
    assert "Temporary failure in name resolution" in output, output
