"""A local cluster of 3 cells behind the real HAProxy: each cell an `orsbox serve` on its
own private Docker engine (`orsbox.cluster.local`). One cluster per module, shared by
the tests; the test that kills a cell restarts it, and the last one takes it all down.

Cell 3 holds at most `CELL3_MAX` sessions, so the full-cell test can fill it. The cells
need a token and serve the sandbox API, as a deployment would."""

from __future__ import annotations

import asyncio
import json
import shutil
import signal
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from openreward import OpenReward
from openreward.api.sandboxes.types import SandboxSettings
from ors.client import ORS

from orsbox.cluster.local import LocalCluster
from orsbox.cluster.processes import Tracked
from orsbox.cluster.router import CELL_GONE
from orsbox.server.cells import cell_of
from tests.servers import free_port
from tests.sse_client import post_sse
from tests.waiting import poll_until

pytestmark = pytest.mark.cluster

TARGETS = [
    "tests/fixture_envs/protocol_envs.py:Protocol",
    "tests/fixture_envs/container_envs.py:OnlyBash",
]
CELL3_MAX = 25  # above its share of the 60 concurrent episodes; the full-cell test fills it
EPISODES = 60
TOKEN = "cluster-token-0123456789abcdef"
AUTH = {"X-API-Key": TOKEN}


@pytest.fixture(scope="module")
def cluster() -> Iterator[LocalCluster]:
    if shutil.which("haproxy") is None:
        pytest.fail("haproxy is missing (scripts/test.sh installs it from Debian)")
    root = Path(tempfile.mkdtemp(prefix="orsc-", dir="/tmp"))  # engine sockets: short paths
    settings = {
        "keepalive_s": "0.5",
        "session_timeout_s": "120",
        "result_linger_s": "30",
        "token": TOKEN,
        "sandbox_api": "1",
    }
    cluster = LocalCluster.up(
        3,
        free_port(),
        TARGETS,
        root,
        images=["orsbox/base:latest"],
        settings=settings,
        cell_settings={3: {"max_sessions": str(CELL3_MAX)}},
    )
    yield cluster
    cluster.down()


# -- raw HTTP through the router -------------------------------------------------------
def new_session(url: str, env: str = "onlybash") -> str:
    sid = httpx.post(f"{url}/create_session", headers=AUTH, timeout=30).json()["sid"]
    body = {"env_name": env, "split": "test", "index": 0}
    if env == "protocol":
        body["split"] = "train"
    r = httpx.post(f"{url}/create", json=body, headers={**AUTH, "X-Session-ID": sid}, timeout=30)
    assert r.status_code == 200, r.text
    return sid


def bash(url: str, sid: str, command: str) -> str:
    body = {"name": "bash", "input": {"command": command}}
    stream = post_sse(f"{url}/onlybash/call", body, sid, **AUTH)
    assert stream.status == 200, stream.raw
    return stream.result()["output"]["blocks"][0]["text"]


def delete(url: str, sid: str) -> None:
    httpx.post(f"{url}/delete", headers={**AUTH, "X-Session-ID": sid})


def sse_result(raw: str) -> dict:
    """The result a whole SSE answer carries (its `chunk`... and `end` events' data)."""
    data, name = [], None
    for line in raw.splitlines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: ") and name in ("chunk", "end"):
            data.append(line[len("data: ") :])
    return json.loads("".join(data))


def health(url: str, cell: str) -> dict:
    pinned = {"X-Session-ID": f"probe.{cell}"}
    return httpx.get(f"{url}/health", headers=pinned, timeout=5).json()


# -- the clients, unmodified, through the router -----------------------------------------
def test_ors_sdk_whole_episodes_through_the_router(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ORS_API_KEY", TOKEN)
    with ORS(base_url=cluster.url) as ors:
        env = ors.environment("protocol")
        assert env.list_splits() == ["train", "test", "hard"]
        with env.session(task=env.list_tasks(split="test")[3]) as session:
            assert session.get_prompt()[0].text == "test 3: what is 3+3?"
            right = session.call_tool("submit", {"answer": "6"})
            assert (right.reward, right.finished, right.blocks[0].text) == (1.0, True, "Correct!")
        shell = ors.environment("onlybash")
        with shell.session(task=shell.list_tasks(split="test")[0]) as session:
            token = uuid.uuid4().hex
            out = session.call_tool("bash", {"command": f"echo {token}"})
            assert out.blocks[0].text.strip() == token


def test_openreward_whole_episode_through_the_router(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENREWARD_SESSION_URL", cluster.url)
    client = OpenReward(api_key=TOKEN)
    try:
        env = client.environments.get("protocol")
        with env.session(task=env.get_task("train", 3)) as session:
            assert session.get_prompt()[0].text == "train 3: what is 3+3?"
            result = session.call_tool("submit", {"answer": "6"})
            assert (result.reward, result.finished) == (1.0, True)
        shell = client.environments.get("protocol", variant="onlybash")
        with shell.session(split="test", index=0) as session:
            out = session.call_tool("bash", {"command": "echo $((6*7))"})
            assert out.blocks[0].text.strip() == "42"
    finally:
        client.environments.close()


# -- placement and pinning ---------------------------------------------------------------
def test_60_concurrent_episodes_spread_over_every_cell_and_stay_exact(
    cluster: LocalCluster, record_property: pytest.RecordProperty
) -> None:
    async def episode(client: httpx.AsyncClient, n: int) -> str:
        sid = (await client.post("/create_session")).json()["sid"]
        headers = {"X-Session-ID": sid}
        body = {"env_name": "onlybash", "split": "test", "index": 0}
        created = await client.post("/create", json=body, headers=headers)
        assert created.status_code == 200, created.text
        for step in range(2):
            token = f"{sid}/{n}/{step}"
            call = {"name": "bash", "input": {"command": f"echo {token}; echo $ORSBOX_X"}}
            answer = await client.post("/onlybash/call", json=call, headers=headers)
            text = sse_result(answer.text)["output"]["blocks"][0]["text"]
            assert text.splitlines()[0] == token, (token, text)  # its own container's answer
        await client.post("/delete", headers=headers)
        return sid

    async def run_all() -> list[str]:
        limits = httpx.Limits(max_connections=EPISODES)
        async with httpx.AsyncClient(
            base_url=cluster.url, headers=AUTH, timeout=120, limits=limits
        ) as client:
            return await asyncio.gather(*(episode(client, n) for n in range(EPISODES)))

    sids = asyncio.run(run_all())
    shares = Counter(cell_of(sid) for sid in sids)
    record_property("cell_shares", dict(shares))
    print(f"\n{EPISODES} concurrent episodes per cell: {dict(sorted(shares.items()))}")
    assert len(set(sids)) == EPISODES
    assert set(shares) == {"cell-1", "cell-2", "cell-3"}, shares


def test_sse_keepalives_pass_through_unbuffered(cluster: LocalCluster) -> None:
    sid = new_session(cluster.url)
    started = time.monotonic()
    body = {"name": "bash", "input": {"command": "sleep 2; echo done"}}
    stream = post_sse(f"{cluster.url}/onlybash/call", body, sid, **AUTH)
    elapsed = time.monotonic() - started
    assert stream.result()["output"]["blocks"][0]["text"].strip() == "done"
    # keep-alive comments (every 0.5 s on these cells) arrived while the command ran,
    # not all at once with the result: the router streams, it does not buffer
    assert len(stream.comments) >= 2, stream.raw
    assert stream.comments[0][0] < elapsed - 0.5, (stream.comments, elapsed)
    delete(cluster.url, sid)


def test_reconnect_by_task_id_reaches_the_same_cell(cluster: LocalCluster) -> None:
    sid = new_session(cluster.url)
    call = {"name": "bash", "input": {"command": "sleep 1; echo reconnected-$((2+3))"}}
    headers = {**AUTH, "X-Session-ID": sid, "Accept": "text/event-stream"}
    with httpx.stream("POST", f"{cluster.url}/onlybash/call", json=call, headers=headers) as r:
        first = next(line for line in r.iter_lines() if line.startswith("data: "))
    task_id = first[len("data: ") :]  # the connection is dropped mid-call here
    again = post_sse(f"{cluster.url}/onlybash/call", {**call, "task_id": task_id}, sid, **AUTH)
    assert again.result()["output"]["blocks"][0]["text"].strip() == "reconnected-5"
    delete(cluster.url, sid)


def test_openreward_sandboxes_are_placed_and_pinned(
    cluster: LocalCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENREWARD_SESSION_URL", cluster.url)
    client = OpenReward(api_key=TOKEN)
    settings = SandboxSettings(
        environment="orsbox/tests", image="orsbox/base:latest", machine_size="1:1",
        block_network=True,
    )  # fmt: skip
    cells = set()
    for _ in range(3):
        with client.sandbox(settings) as box:
            assert box.sid.startswith("sbx-")
            cells.add(cell_of(box.sid))
            output, code = box.run(f"echo {box.sid}")
            assert (output, code) == (box.sid, 0)  # run reached the sandbox's own cell
    assert cells <= {c.cell for c in cluster.cells} and None not in cells


def test_a_session_id_is_misdirected_only_when_sent_straight_to_another_cell(
    cluster: LocalCluster,
) -> None:
    sid = new_session(cluster.url)
    owner = cell_of(sid)
    other = next(c for c in cluster.cells if c.cell != owner)
    r = httpx.post(f"{other.url}/ping", headers={**AUTH, "X-Session-ID": sid})
    assert r.status_code == 421 and f"cell {owner!r}" in r.json()["detail"]
    ping = httpx.post(f"{cluster.url}/ping", headers={**AUTH, "X-Session-ID": sid})
    assert ping.status_code == 200
    delete(cluster.url, sid)


def test_a_full_cell_moves_placement_to_the_others(cluster: LocalCluster) -> None:
    full = cluster.cells[2]
    before = health(cluster.url, full.cell)["sessions"]
    with ThreadPoolExecutor(8) as pool:  # fill it straight, then place through the router
        held = list(
            pool.map(lambda _: new_session(full.url, "protocol"), range(CELL3_MAX - before))
        )
        refused = httpx.post(f"{full.url}/create_session", headers=AUTH)
        assert refused.status_code == 503 and refused.headers["retry-after"]
        more = list(pool.map(lambda _: new_session(cluster.url, "protocol"), range(9)))
        assert {cell_of(sid) for sid in more} <= {"cell-1", "cell-2"}, more
        list(pool.map(lambda sid: delete(cluster.url, sid), held + more))
    assert health(cluster.url, full.cell)["sessions"] == before


# -- a cell dies ---------------------------------------------------------------------------
def test_a_killed_cell_takes_only_its_own_sessions(cluster: LocalCluster) -> None:
    by_cell: dict[str, list[str]] = {}
    while any(len(by_cell.get(c.cell, [])) < 2 for c in cluster.cells):
        sid = new_session(cluster.url)
        by_cell.setdefault(cell_of(sid) or "", []).append(sid)
    for sids in by_cell.values():
        for sid in sids:
            assert bash(cluster.url, sid, f"echo {sid}").strip() == sid
    victim = cluster.cells[1]
    engine = cluster.engine(victim)
    assert engine.containers(), "the victim's sessions run containers on its engine"

    victim.process.send(signal.SIGKILL)
    killed_at = time.monotonic()
    for sid in by_cell[victim.cell]:
        body = {"name": "bash", "input": {"command": "true"}}
        stream = post_sse(f"{cluster.url}/onlybash/call", body, sid, **AUTH)
        assert stream.status == 410, stream.raw
        assert json.loads(stream.raw)["detail"] == CELL_GONE
    answered_within = time.monotonic() - killed_at
    print(f"\nsessions of the killed cell got 410 within {answered_within:.2f}s")
    assert answered_within < 5.0

    # the other cells' sessions go on, exact; new sessions land on live cells
    for cell, sids in by_cell.items():
        if cell != victim.cell:
            for sid in sids:
                assert bash(cluster.url, sid, f"echo again {sid}").strip() == f"again {sid}"
    fresh = [new_session(cluster.url) for _ in range(4)]
    assert victim.cell not in {cell_of(sid) for sid in fresh}
    assert bash(cluster.url, fresh[0], "echo $((40+2))").strip() == "42"
    # its containers end by the dead-man's switch: nothing is left on its engine
    poll_until(lambda: not engine.containers(), 20)

    # a cell that comes back serves new sessions
    cluster.start_cell(victim)
    cluster.wait_healthy()
    placed: set[str | None] = set()
    for _ in range(12):
        sid = new_session(cluster.url)
        placed.add(cell_of(sid))
        if cell_of(sid) == victim.cell:
            assert bash(cluster.url, sid, "echo back").strip() == "back"
            break
    assert victim.cell in placed, placed


def test_zz_down_removes_everything(cluster: LocalCluster) -> None:
    processes = [c.process for c in cluster.cells]
    engines = [cluster.engine(c) for c in cluster.cells]
    bridges = [e.bridge for e in engines]
    assert all(interface_exists(b) for b in bridges)
    processes += [Tracked.of(int(e.pidfile.read_text())) for e in engines]
    processes.append(Tracked(cluster.state.router_pid, cluster.state.router_started))
    assert all(p.alive() for p in processes)
    cluster.down()
    assert not any(p.alive() for p in processes)  # cells, engines, router
    assert not cluster.root.exists()  # engine data, sockets, logs, state file
    assert not any(interface_exists(b) for b in bridges)
    # the machine's own engine keeps its bridge (a dockerd with `bridge: none` deletes it)
    assert interface_exists("docker0") or not HAD_DOCKER0


def interface_exists(name: str) -> bool:
    return Path("/sys/class/net", name).exists()


HAD_DOCKER0 = interface_exists("docker0")
