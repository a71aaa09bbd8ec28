"""SWE-scale images across cells: `python -m bench --parts images` (issue 35).

Everything real: Debian's docker-registry on loopback (`orsbox.cluster.registry`), cells
on private Docker engines that pull through it as a mirror (`orsbox cluster up
--registry`), the stock HAProxy router. The instance images are made here: the SWE-bench
test instance image (tests/formats/swebench) plus `SIZE_MB` of random bytes each
(incompressible), pushed to the registry; the episodes are real SWE-bench 5 episodes.

* **Cold cell.** A cell whose engine has never seen the image (nor its base): the time
  from `/create_session` to the result of the episode's first call (`echo hi`), through
  the router, against the same image by hand on another fresh engine pulling from the
  same registry: `docker pull` + `docker run -d` + `docker exec echo hi` (CLI wall time).
* **Routing.** 3 cells, `IMAGES` images, `PER_IMAGE` sessions each (60) opened in one
  shuffled order, `CONCURRENCY` at a time, all held until the last has had its first
  call. Once with each session naming its image (`X-Orsbox-Image`: consistent hashing),
  once without (`leastconn`), each on fresh engines. Pulls per image over the cluster
  (the cells' `orsbox_image_pulls_total`, summed, over the images), and evenness: the
  busiest cell's sessions over the mean (1.00 is even). Each cell holds at most
  `MAX_SESSIONS` (25: 60/3 plus 25 %): that is the bound on load; a full cell's 503
  sends the session on along the ring.
* **Eviction.** One cell with a disk budget of 2.5 images; a session on image 0 stays
  live throughout while images 1..4 are used in turn, then it ends and image 1 is used
  again. After every use the images on the cell's engine and the cell's evictions must
  match an LRU model that never evicts the live session's image, and the live session
  must still run (`evictions-ok`).

Prints `images: pulls/image=X leastconn pulls/image=Y cold-first-call=Z s
evictions-ok=yes|no`. Removes everything: cells, engines, router, registry, images.
"""

from __future__ import annotations

import asyncio
import json
import random
import re
import shutil
import subprocess
import tempfile
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import httpx

from bench import servers
from bench.harness import Bench
from bench.stats import Row
from orsbox.cluster.engines import PrivateEngine
from orsbox.cluster.local import LocalCluster
from orsbox.cluster.pushing import push
from orsbox.cluster.registry import LocalRegistry, start_on_free_port
from orsbox.cluster.router import IMAGE_HEADER
from orsbox.server.cells import cell_of
from tests.cluster import instances

IMAGES = 6
PER_IMAGE = 10
CELLS = 3
MAX_SESSIONS = 25
CONCURRENCY = 6
ENV = "insts"
PART = "images (registry, routing, budget)"


@dataclass
class RoutingRun:
    placement: str
    pulls: float = 0.0
    per_cell: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    def pulls_per_image(self) -> float:
        return self.pulls / IMAGES

    def evenness(self) -> float:
        counts = list(self.per_cell.values()) + [0] * (CELLS - len(self.per_cell))
        return max(counts) / (sum(counts) / CELLS)


# -- an episode over HTTP --------------------------------------------------------------
async def open_episode(client: httpx.AsyncClient, url: str, n: int, image: str | None) -> str:
    placed = {IMAGE_HEADER: image} if image else {}
    while True:  # as the ORS clients do: a 503 (every cell full) is retried after a while
        answer = await client.post(f"{url}/create_session", headers=placed)
        if answer.status_code != 503:
            break
        await asyncio.sleep(min(1.0, float(answer.headers.get("retry-after", "1"))))
    if answer.status_code != 200:
        raise RuntimeError(f"/create_session answered {answer.status_code}: {answer.text}")
    sid = str(answer.json()["sid"])
    body = {"env_name": ENV, "task_spec": {"instance_id": instances.instance_id(n)}}
    r = await client.post(f"{url}/create", json=body, headers={"X-Session-ID": sid})
    if r.status_code != 200:
        raise RuntimeError(f"/create answered {r.status_code}: {r.text}")
    return sid


async def bash(client: httpx.AsyncClient, url: str, sid: str, command: str) -> str:
    """One bash call; 503 (setup, the pull included, still running) is asked again."""
    body = {"name": "bash", "input": {"command": command}}
    headers = {"X-Session-ID": sid, "Accept": "text/event-stream"}
    while True:
        r = await client.post(f"{url}/{ENV}/call", json=body, headers=headers)
        if r.status_code != 503:
            break
    if r.status_code != 200:
        raise RuntimeError(f"call answered {r.status_code}: {r.text[:300]}")
    result = sse_result(r.text)
    if not result.get("ok"):
        raise RuntimeError(f"bash failed: {result}")
    return str(result["output"]["blocks"][0]["text"])


def sse_result(text: str) -> dict:
    data, name = [], None
    for line in text.splitlines():
        if line.startswith("event: "):
            name = line[len("event: ") :]
        elif line.startswith("data: ") and name in ("chunk", "end"):
            data.append(line[len("data: ") :])
    return dict(json.loads("".join(data)))


async def delete(client: httpx.AsyncClient, url: str, sid: str) -> None:
    await client.post(f"{url}/delete", headers={"X-Session-ID": sid})


def pulls(cell_url: str) -> float:
    text = httpx.get(f"{cell_url}/metrics", timeout=10).text
    line = next(x for x in text.splitlines() if x.startswith("orsbox_image_pulls_total "))
    return float(line.split()[1])


def new_cluster(
    n: int, target: str, registry: str, settings: dict[str, str], root_prefix: str
) -> LocalCluster:
    root = Path(tempfile.mkdtemp(prefix=root_prefix, dir="/tmp"))
    base = {"session_timeout_s": "900", "setup_wait_s": "600"}
    return LocalCluster.up(
        n, servers.free_port(), [target], root, settings={**base, **settings}, registry=registry
    )


# -- cold cell ---------------------------------------------------------------------------
async def cold_first_call(cluster: LocalCluster, image: str) -> tuple[float, str]:
    """Seconds from /create_session to the first call's result on a fresh cell; the sid."""
    async with httpx.AsyncClient(timeout=900) as client:
        started = time.perf_counter()
        sid = await open_episode(client, cluster.url, 0, image)
        out = await bash(client, cluster.url, sid, "echo hi")
        elapsed = time.perf_counter() - started
    assert out == "hi\n", out
    return elapsed, sid


def by_hand(root: Path, registry: str, image: str) -> float:
    """`docker pull` + `docker run -d` + `docker exec` on a fresh engine, in seconds."""
    engine = PrivateEngine(root, (registry,))
    engine.start()
    try:
        engine.wait_ready()
        started = time.perf_counter()
        engine.docker("pull", "-q", image)
        cid = engine.docker("run", "-d", "--network", "none", image, "sleep", "infinity")
        out = engine.docker("exec", cid.stdout.decode().strip(), "echo", "hi")
        elapsed = time.perf_counter() - started
        assert out.stdout == b"hi\n", out
        return elapsed
    finally:
        engine.stop()


# -- routing -------------------------------------------------------------------------------
async def routing(
    target: str, registry: str, made: list[str], by_image: bool, prefix: str
) -> RoutingRun:
    order = [n for n in range(IMAGES) for _ in range(PER_IMAGE)]
    random.Random(35).shuffle(order)
    cluster = await asyncio.to_thread(
        new_cluster, CELLS, target, registry, {"max_sessions": str(MAX_SESSIONS)}, prefix
    )
    run = RoutingRun("image hash" if by_image else "leastconn")
    sids: list[str] = []
    gate = asyncio.Semaphore(CONCURRENCY)
    try:
        async with httpx.AsyncClient(timeout=900) as client:

            async def one(n: int) -> None:
                async with gate:
                    sid = await open_episode(client, cluster.url, n, made[n] if by_image else None)
                    sids.append(sid)
                    out = await bash(client, cluster.url, sid, f"ls /blob-{n}")
                    assert out.strip() == f"/blob-{n}", out

            started = time.perf_counter()
            await asyncio.gather(*(one(n) for n in order))
            run.seconds = time.perf_counter() - started
            run.per_cell = dict(Counter(str(cell_of(sid)) for sid in sids))
            run.pulls = sum(pulls(c.url) for c in cluster.cells)
            await asyncio.gather(*(delete(client, cluster.url, sid) for sid in sids))
    finally:
        await asyncio.to_thread(cluster.down)
    return run


# -- eviction --------------------------------------------------------------------------------
@dataclass
class LruModel:
    """What the cell should hold: LRU over the pulled images, never the pinned one."""

    budget_images: int
    held: list[str] = field(default_factory=list)  # least recently used first
    evicted: list[str] = field(default_factory=list)

    def use(self, image: str, pinned: set[str]) -> None:
        if image in self.held:
            self.held.remove(image)
        self.held.append(image)
        for candidate in list(self.held):
            if len(self.held) <= self.budget_images:
                break
            if candidate not in pinned and candidate != image:
                self.held.remove(candidate)
                self.evicted.append(candidate)


def held_on(cluster: LocalCluster, made: list[str]) -> set[str]:
    engine = cluster.engine(cluster.cells[0])
    return {i for i in made if engine.docker("image", "inspect", i, check=False).returncode == 0}


async def containers_become(cluster: LocalCluster, count: int, timeout_s: float = 60) -> None:
    """Until the cell's engine holds `count` containers (a deleted session's container
    is removed after /delete answers; until then its image is in use)."""
    engine = cluster.engine(cluster.cells[0])
    deadline = time.monotonic() + timeout_s
    while len(engine.containers()) != count:
        if time.monotonic() > deadline:
            raise RuntimeError(f"the cell still has {engine.containers()} containers")
        await asyncio.sleep(0.05)


def evicted_on(cluster: LocalCluster) -> list[str]:
    """The cell's "last evicted" row on its status page (newest last, at most five)."""
    page = httpx.get(f"{cluster.cells[0].url}/", timeout=10).text
    row = re.search(r"last evicted</t[hd]>\s*<td>([^<]*)</td>", page)
    if row is None or row[1].strip() == "-":
        return []
    return [x.strip() for x in row[1].split(",")]


async def eviction(cluster: LocalCluster, made: list[str], live_sid: str, log: list[str]) -> bool:
    """Images 1..4 in turn beside the live session on image 0, then 1 again once the
    live session has ended; True when the cell matched the LRU model at every step."""
    model = LruModel(budget_images=2)
    model.use(made[0], pinned={made[0]})
    ok = held_on(cluster, made) == {made[0]}
    url = cluster.url
    async with httpx.AsyncClient(timeout=900) as client:
        turns = [(n, {made[0]}) for n in (1, 2, 3, 4)] + [(1, set())]
        for n, pinned in turns:
            if not pinned:  # the live session ends before the last turn
                assert await bash(client, url, live_sid, "ls /blob-0") == "/blob-0\n"
                await delete(client, url, live_sid)
                await containers_become(cluster, 0)
            sid = await open_episode(client, url, n, made[n])
            assert (await bash(client, url, sid, f"ls /blob-{n}")).strip() == f"/blob-{n}"
            await delete(client, url, sid)
            await containers_become(cluster, len(pinned))
            model.use(made[n], pinned)
            held, evicted = held_on(cluster, made), evicted_on(cluster)
            step_ok = held == set(model.held) and evicted == model.evicted[-5:]
            log.append(f"use {n}: held {sorted(held)} evicted {evicted} ok={step_ok}")
            ok = ok and step_ok
            if pinned:
                live = await bash(client, url, live_sid, "ls /blob-0")
                ok = ok and live == "/blob-0\n"
    return ok


# -- the part ----------------------------------------------------------------------------------
async def run(bench: Bench) -> list[Row]:
    size_mb = bench.scale(300, 30)
    token = uuid.uuid4().hex[:10]
    work = Path(tempfile.mkdtemp(prefix="orsi-", dir="/tmp"))
    registry: LocalRegistry | None = None
    raw: dict[str, object] = {"size_mb": size_mb}
    try:
        made = await asyncio.to_thread(instances.build, token, IMAGES, size_mb, "orsbox-bench")
        target = f"swebench:{instances.write_dataset(work / f'{ENV}.jsonl', made)}"
        registry = await asyncio.to_thread(start_on_free_port, work / "registry")
        import docker

        started = time.perf_counter()
        report = await asyncio.to_thread(push, docker.from_env(), made, registry.address, print)
        raw["push_s"], raw["pushed_mb"] = time.perf_counter() - started, report.bytes_sent / 1e6
        if report.failed:
            raise RuntimeError(f"push failed: {report.failed}")
        size = int(
            json.loads(subprocess.run(["docker", "image", "inspect", made[0]], capture_output=True,
                                      check=True).stdout)[0]["Size"]
        )  # fmt: skip
        raw["image_bytes"] = size

        hand = await asyncio.to_thread(by_hand, work / "hand", registry.address, made[0])
        budget = {"image_disk_budget": str(int(2.5 * size))}
        cluster = await asyncio.to_thread(new_cluster, 1, target, registry.address, budget, "orsi-")
        steps: list[str] = []
        try:
            cold, live_sid = await cold_first_call(cluster, made[0])
            evictions_ok = await eviction(cluster, made, live_sid, steps)
        finally:
            await asyncio.to_thread(cluster.down)
        raw.update(cold_first_call_s=cold, by_hand_s=hand, eviction_steps=steps)

        hashed = await routing(target, registry.address, made, True, "orsi-")
        least = await routing(target, registry.address, made, False, "orsi-")
        for r in (hashed, least):
            raw[r.placement] = {
                "pulls": r.pulls,
                "per_cell": r.per_cell,
                "seconds": r.seconds,
                "evenness": r.evenness(),
            }
    finally:
        if registry is not None:
            await asyncio.to_thread(registry.stop)
        await asyncio.to_thread(instances.remove, token)
        shutil.rmtree(work, ignore_errors=True)
    bench.raw["images"] = raw
    print(
        f"images: pulls/image={hashed.pulls_per_image():.2f} "
        f"leastconn pulls/image={least.pulls_per_image():.2f} cold-first-call={cold:.1f} s "
        f"evictions-ok={'yes' if evictions_ok else 'no'}",
        flush=True,
    )
    return [
        Row(
            PART,
            f"pulls per image, {IMAGES} images x {PER_IMAGE} sessions on {CELLS} cells",
            f"{hashed.pulls_per_image():.2f}",
            f"leastconn {least.pulls_per_image():.2f}",
            "≤ 1.5",
            hashed.pulls_per_image() <= 1.5,
        ),
        Row(
            PART,
            "load evenness (busiest cell / mean), image hash vs leastconn",
            f"{hashed.evenness():.2f} {sorted(hashed.per_cell.values())}",
            f"leastconn {least.evenness():.2f} {sorted(least.per_cell.values())}",
            f"≤ {MAX_SESSIONS * CELLS / (IMAGES * PER_IMAGE):.2f} (cell cap)",
            hashed.evenness() <= MAX_SESSIONS * CELLS / (IMAGES * PER_IMAGE),
        ),
        Row(
            PART,
            f"60 sessions to first call, {size_mb} MB images (s)",
            f"{hashed.seconds:.0f}",
            f"leastconn {least.seconds:.0f}",
        ),
        Row(
            PART,
            f"cold cell: create_session -> first call, {size / 1e6:.0f} MB image (s)",
            f"{cold:.1f}",
            f"docker pull+run+exec by hand {hand:.1f}",
        ),
        Row(
            PART,
            "LRU eviction, budget of 2 images, 5 used, one kept live",
            "yes" if evictions_ok else "no",
            target="matches LRU, live image kept",
            met=evictions_ok,
        ),
    ]
