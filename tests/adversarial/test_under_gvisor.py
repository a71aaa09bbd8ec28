"""The container-environment and adversarial tests again, CI-sized, with a server whose
sandboxes run under gVisor (`runtime = "runsc"`, on the private engine of
scripts/start-runsc-engine.sh): the same test functions, given an episode of a runsc
server. CI-sized: the slowest (a gigabyte of output, a thousand children) stay with
runc, as fork and exec cost several times more under gVisor. Where gVisor differs (tests/runtimes.py `GVISOR_DIFFERENCES`), the test here
asserts gVisor's behaviour instead: a memory bomb fails inside (RLIMIT_AS)."""

from __future__ import annotations

import json
import signal
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from tests.adversarial import test_processes
from tests.containers import test_container_tools as tools
from tests.containers.conftest import Episode, open_episode, start_container_server
from tests.monitoring.conftest import wait_for_episode
from tests.runtimes import RUNSC_ENGINE, runtime_available
from tests.servers import LiveServer
from tests.waiting import wait_until

pytestmark = pytest.mark.docker

ENVS = ["tests/adversarial/envs.py:Hostile", "tests/fixture_envs/container_envs.py:Sandboxed"]
RUNSC_BACKEND = json.dumps({"type": "docker", "engine": RUNSC_ENGINE, "runtime": "runsc"})


@pytest.fixture(scope="module")
def runsc_engine() -> Iterator[docker.DockerClient]:
    runtime_available("runsc")
    client = docker.DockerClient(base_url=RUNSC_ENGINE, timeout=60)
    yield client
    client.close()


def ours(client: docker.DockerClient, server: LiveServer) -> list[dict[str, Any]]:
    label = f"orsbox.server={server.server_id}"
    return client.api.containers(all=True, filters={"label": label})


def start_runsc_server(tmp_path: Path) -> LiveServer:
    return start_container_server(
        tmp_path, ENVS, setup_wait_s=60, backend=RUNSC_BACKEND, episodes_db=episodes(tmp_path)
    )


def episodes(folder: Path) -> Path:
    """The episode database of the server started in `folder` (`start_runsc_server`)."""
    return folder / "episodes.sqlite3"


@pytest.fixture(scope="module")
def runsc_server(
    tmp_path_factory: pytest.TempPathFactory, base_image: str, runsc_engine: docker.DockerClient
) -> Iterator[LiveServer]:
    server = start_runsc_server(tmp_path_factory.mktemp("runsc"))
    yield server
    server.stop()
    assert not ours(runsc_engine, server), "shutdown left containers"


@pytest.fixture
def hostile(runsc_server: LiveServer) -> Iterator[Episode]:
    ep = open_episode(runsc_server, "hostile")
    yield ep
    ep.delete()


SAME_TESTS: list[Callable[[Episode], None]] = [
    tools.test_shell_state_persists,
    tools.test_timeout_kills_the_whole_tree_and_the_shell_survives,
    tools.test_file_tools_round_trip,
    tools.test_binary_and_invalid_utf8_output,
    test_processes.test_orphans_never_hold_a_call_and_die_with_their_shell,
    tools.test_output_floods_are_capped_and_server_memory_stays_bounded,
    tools.test_per_call_output_cap,
]


@pytest.mark.parametrize("test", SAME_TESTS, ids=lambda test: test.__name__)
def test_holds_under_gvisor(test: Callable[[Episode], None], hostile: Episode) -> None:
    test(hostile)


def test_the_sandbox_runs_under_gvisor(hostile: Episode) -> None:
    text, _ = hostile.bash("dmesg | head -1; uname -r")
    assert "gVisor" in text, text


def test_a_memory_bomb_fails_inside_and_the_session_answers(hostile: Episode) -> None:
    """One process allocating past the sandbox's memory fails its allocation (RLIMIT_AS,
    tests/adversarial/test_gvisor_bombs.py) instead of ending the sandbox."""
    out = hostile.ok("python", code="x = bytearray(2 * 1024**3)")
    assert "MemoryError" in str(out), out
    assert hostile.bash("echo alive")[0] == "alive\n"


def test_processes_that_together_pass_the_memory_are_killed_and_the_session_answers(
    runsc_server: LiveServer, hostile: Episode
) -> None:
    """Eight processes of 100 MiB in the hostile env's 256 MiB sandbox, each under
    RLIMIT_AS: the guest's memory watch kills the largest (tests/adversarial/
    test_gvisor_bombs.py) and the call's answer says out of memory, as runc's OOM
    killer would end them; the sandbox and the episode go on."""
    command = (
        "for i in $(seq 8); do"
        ' python3 -c "b = bytearray(100 * 1024**2); import time; time.sleep(3)" &'
        " done; wait; echo waited"
    )
    stream = hostile.call("bash", command=command, timeout=60)
    if "ran out of memory" in str(stream.events):  # the host's bound was reached after all
        hostile.delete()
        row = wait_for_episode(episodes(runsc_server.log_path.parent), hostile.sid)
        assert row["state"] == "failed" and "out of memory" in row["error"], dict(row)
        return
    output = stream.result()["output"]
    assert "out of memory: killed process" in output["blocks"][0]["text"], output
    assert output["metadata"]["oom_killed"] is True, output
    assert hostile.bash("echo alive")[0] == "alive\n"


def test_a_sandbox_that_dies_under_an_episode_fails_it_with_the_reason(
    runsc_server: LiveServer, runsc_engine: docker.DockerClient
) -> None:
    """The episode's record keeps why its sandbox died (`SandboxGone`'s message: for an
    OOM, "ran out of memory"), not just the failed call's."""
    ep = open_episode(runsc_server, "hostile")
    ep.bash("echo started")
    (container,) = runsc_engine.containers.list(filters={"label": f"orsbox.session={ep.sid}"})
    container.kill()
    assert "is gone" in str(ep.call("bash", command="echo after").events)
    ep.delete()
    row = wait_for_episode(episodes(runsc_server.log_path.parent), ep.sid)
    assert row["state"] == "failed" and "is gone" in row["error"], dict(row)


# serial: runsc takes its bombed sandbox down in seconds alone, past a minute on a busy machine
@pytest.mark.serial
def test_a_fork_bomb_is_contained_or_ends_the_sandbox_as_oom(hostile: Episode) -> None:
    """GVISOR_DIFFERENCES["fork-bomb-memory"]: RLIMIT_NPROC stops the bomb at the pids
    limit, but each guest process also costs gVisor host memory, so with a small
    memory limit (256 MiB here) the sandbox may run out of memory first. Either way the
    host and the server are untouched and the outcome is reported."""
    stream = hostile.call("bash", command=":(){ :|:& };:; sleep 5", timeout=4)
    if "ran out of memory" in str(stream.events):
        return
    meta = stream.result()["output"]["metadata"]
    assert meta["timed_out"] is True
    assert hostile.bash("unset -f :; echo ok")[0].endswith("ok\n")


def test_disk_limits_hold(hostile: Episode) -> None:
    text, _ = hostile.bash("head -c 100M /dev/zero > /workspace/fill; stat -c %s /workspace/fill")
    assert "No space left on device" in text
    assert int(text.split()[-1]) <= 32 * 1024**2
    assert hostile.bash("touch /usr/x 2>&1")[0].strip() != ""  # the rest is read-only


def test_sigkill_of_the_server_leaves_nothing(
    tmp_path: Any, base_image: str, runsc_engine: docker.DockerClient
) -> None:
    server = start_runsc_server(tmp_path)
    for _ in range(2):
        open_episode(server, "hostile").bash("sleep 100 &")
    assert len(ours(runsc_engine, server)) == 2
    server.stop(signal.SIGKILL)
    wait_until(lambda: not ours(runsc_engine, server), 30, 0.2, "the dead-man's switch")
