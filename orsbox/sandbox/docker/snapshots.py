"""`DockerSnapshots`: snapshots as local images made by `docker commit`.

An image is named `orsbox-<kind>/<name>:used-<unix ms>`. Its labels say what it is
(`orsbox.snapshot=<kind>` and the caller's labels); labels on an image cannot change, so
the time of last use, which must survive a restart for least-recently-used eviction, is
the tag: using a snapshot re-tags it with the current time (two engine calls, ~5 ms,
made in the background). A commit inherits the container's labels; the owner labels
(`orsbox.sandbox.host.owner`) are overwritten with this server's for a fork (so a later `sweep` or
`orsbox gc` can remove the images of a server that died) and blanked for setup
snapshots (its images are meant to outlive the server).

The container is paused during the commit (a consistent copy; about 0.3 s for a 50 MB
change here) and goes on afterwards. What a commit does not hold: processes, memory,
bind mounts and tmpfs folders (a `disk_bytes` sandbox's writable folders): callers
refuse to snapshot such sandboxes rather than save half a state.
"""

from __future__ import annotations

import asyncio
import re
import time
from typing import Any

from orsbox.sandbox.base import Sandbox
from orsbox.sandbox.docker.engine import Engine
from orsbox.sandbox.host import owner as L
from orsbox.sandbox.snapshots import Snapshot, SnapshotStore

KIND = "orsbox.snapshot"
TAG_PREFIX = "used-"
OWNER_KINDS = frozenset({"fork"})  # kinds whose images die with their server


def repository(kind: str, name: str) -> str:
    """`orsbox-<kind>/<name>`, reduced to what docker accepts in a repository name."""
    safe = re.sub(r"[^a-z0-9._-]+", "-", name.lower()).strip("-._")[:100] or "snapshot"
    return f"orsbox-{kind}/{safe}"


def used_tag(when: float | None = None) -> str:
    return f"{TAG_PREFIX}{int((time.time() if when is None else when) * 1000)}"


def last_used(tags: list[str], created: float) -> float:
    """The newest `used-<ms>` tag's time; the image's creation without one."""
    times = [
        int(tag.rsplit(":", 1)[1][len(TAG_PREFIX) :]) / 1000
        for tag in tags
        if tag.rsplit(":", 1)[-1].startswith(TAG_PREFIX)
        and tag.rsplit(":", 1)[1][len(TAG_PREFIX) :].isdigit()
    ]
    return max(times, default=created)


class DockerSnapshots(SnapshotStore):
    def __init__(self, engine: Engine, server_id: str) -> None:
        self.engine = engine
        self.server_id = server_id
        self._touching: set[asyncio.Task[None]] = set()

    async def commit(
        self, sandbox: Sandbox, *, kind: str, name: str, labels: dict[str, str]
    ) -> Snapshot:
        owner = L.owner_labels(self.server_id)
        if kind not in OWNER_KINDS:
            owner = {key: "" for key in owner if key != L.ORSBOX}
        all_labels = {**labels, **owner, L.SESSION: "", KIND: kind}
        repo, tag = repository(kind, name), used_tag()
        ref = await self.engine.commit(sandbox.id, repo, tag, all_labels)
        now = time.time()
        return Snapshot(ref, f"{repo}:{tag}", kind, all_labels, 0, now, now)

    async def find(
        self, kind: str, labels: dict[str, str] | None = None, *, sizes: bool = False
    ) -> list[Snapshot]:
        wanted = [f"{KIND}={kind}", *(f"{k}={v}" for k, v in (labels or {}).items())]
        images = await self.engine.images(wanted)
        size_of = {}
        if sizes and images:
            size_of = {i["Id"]: i.get("Size", 0) for i in await self.engine.images(None)}
        return [to_snapshot(i, kind, size_of) for i in images]

    async def touch(self, snapshot: Snapshot) -> None:
        """Re-tag with the current time in the background; a failure only costs the
        entry its place in the eviction order."""
        task = asyncio.create_task(self._retag(snapshot))
        self._touching.add(task)
        task.add_done_callback(self._touching.discard)

    async def _retag(self, snapshot: Snapshot) -> None:
        repo = snapshot.name.rsplit(":", 1)[0]
        try:
            await self.engine.tag_image(snapshot.ref, repo, used_tag())
            await self.engine.remove_image(snapshot.name)
        except Exception:  # the image was evicted meanwhile: nothing to mark
            return

    async def remove(self, ref: str) -> bool:
        return await self.engine.remove_image(ref)

    async def image_id(self, image: str) -> str:
        return str((await self.engine.inspect_image(image))["Id"])

    async def sweep(self) -> int:
        """Remove fork images whose server died (judged as containers are, `host.owner`)."""
        removed = 0
        for kind in OWNER_KINDS:
            for snapshot in await self.find(kind):
                if L.is_mine(snapshot.labels, self.server_id):
                    continue
                if L.owner_is_dead(snapshot.labels) and await self.remove(snapshot.ref):
                    removed += 1
        return removed

    async def close(self) -> None:
        await asyncio.gather(*self._touching, return_exceptions=True)


def to_snapshot(image: dict[str, Any], kind: str, size_of: dict[str, int]) -> Snapshot:
    tags = [t for t in image.get("RepoTags") or [] if t != "<none>:<none>"]
    created = float(image.get("Created", 0))
    size = 0
    if image["Id"] in size_of:
        parent = size_of.get(image.get("ParentId") or "", 0)
        size = max(0, size_of[image["Id"]] - parent)
    return Snapshot(
        ref=image["Id"],
        name=max(tags, default=image["Id"]),
        kind=kind,
        labels=dict(image.get("Labels") or {}),
        size_bytes=size,
        created=created,
        last_used=last_used(tags, created),
    )
