"""Bounded writable folders: how the Docker backend enforces `SandboxLimits.disk_bytes`.

Docker can cap a container's writable layer only on overlay2 over xfs with project
quotas (`storage_opt size`), which most hosts lack (ext4 here). So a sandbox with
`disk_bytes` gets a read-only root filesystem and a tmpfs of `disk_bytes` on each folder
an agent writes to: the working directory, the user's home, /tmp and /var/tmp. Filling
one gives ENOSPC inside the container; nothing reaches the host's disk. tmpfs lives in
memory and counts against the container's memory limit, so `memory_bytes` bounds all of
them together (a session that fills them has that much less memory, nothing more).

A tmpfs hides what the image has in its folder (a repository in /workspace, dotfiles in
home), so that content is copied in at start: read once per image from a created, never
started container, and unpacked by a guest running as the folder's owner (the folder
keeps its owner and mode: `uid`/`gid` on the mount, and runc copies the mode). Content
larger than `CACHE_MAX_BYTES` is not kept; it is read again from each new container
before it starts.
"""

from __future__ import annotations

import asyncio
import io
import posixpath
import tarfile
from collections import OrderedDict
from dataclasses import dataclass, replace
from typing import Any

from orsbox.sandbox.base import SandboxSpec
from orsbox.sandbox.docker.engine import Engine

SCRATCH = ("/tmp", "/var/tmp")
CACHE_MAX_BYTES = 32 * 1024 * 1024  # per folder; larger content is re-read per start
CACHED_IMAGES = 32


@dataclass(frozen=True)
class Folder:
    """One bounded folder: its owner in the image, and the image's content for it (a
    tar relative to the folder; None when empty; `large` when too big to keep)."""

    path: str
    uid: int
    gid: int
    content: bytes | None = None
    large: bool = False


@dataclass(frozen=True)
class DiskPlan:
    size_bytes: int
    user: str  # "uid:gid" the sandbox runs as
    folders: tuple[Folder, ...]

    def tmpfs(self) -> dict[str, str]:
        """docker's `tmpfs` option: mount point -> mount options."""
        return {
            f.path: f"size={self.size_bytes},uid={f.uid},gid={f.gid},exec,nosuid,nodev"
            for f in self.folders
        }

    def owner(self, folder: Folder) -> str | None:
        """Who unpacks the folder's content: None for the sandbox's own guest."""
        owner = f"{folder.uid}:{folder.gid}"
        return None if owner == self.user else owner


class DiskPlanner:
    """Plans each bounded sandbox's folders, reading each image once (then cached)."""

    def __init__(self, engine: Engine, labels: dict[str, str]) -> None:
        self.engine = engine
        self.labels = labels  # a probe container is swept like a sandbox if we die
        self._cache: OrderedDict[tuple[str, str, str], tuple[str, tuple[Folder, ...]]] = (
            OrderedDict()
        )
        self._probing: dict[tuple[str, str, str], asyncio.Future[tuple[str, tuple[Folder, ...]]]]
        self._probing = {}

    async def plan(self, spec: SandboxSpec, size_bytes: int) -> DiskPlan:
        image = await self.engine.inspect_image(spec.image)
        config = image.get("Config") or {}
        user = spec.user or config.get("User") or "root"
        workdir = spec.workdir or config.get("WorkingDir") or "/"
        key = (image["Id"], user, workdir)
        if key not in self._cache:
            self._cache[key] = await self._probe_once(key, spec.image, user, workdir)
            while len(self._cache) > CACHED_IMAGES:
                self._cache.popitem(last=False)
        self._cache.move_to_end(key)
        ids, folders = self._cache[key]
        return DiskPlan(size_bytes, ids, folders)

    async def fill_large(self, plan: DiskPlan, container_id: str) -> DiskPlan:
        """Read content too large to cache from the (created, not started) container."""
        folders = []
        for folder in plan.folders:
            if folder.large:
                archive = await self.engine.get_archive(container_id, folder.path)
                folder = replace(folder, content=_relative(archive), large=False)
            folders.append(folder)
        return replace(plan, folders=tuple(folders))

    async def _probe_once(
        self, key: tuple[str, str, str], image: str, user: str, workdir: str
    ) -> tuple[str, tuple[Folder, ...]]:
        """One probe per image at a time: a burst of creates of an image not yet cached
        shares one. Each probe is a container, archive reads and tar rewrites; ten at
        once, as ten sessions starting together made, held the server's event loop
        (the rewrites, and the archive-reading threads' share of the GIL) and its
        `/health` answers for hundreds of milliseconds. Shielded: a caller that is
        cancelled does not cancel the others' probe."""
        probe = self._probing.get(key)
        if probe is None:
            probe = asyncio.ensure_future(self._probe(image, user, workdir))
            self._probing[key] = probe
            probe.add_done_callback(lambda _: self._probing.pop(key, None))
        return await asyncio.shield(probe)

    async def _probe(self, image: str, user: str, workdir: str) -> tuple[str, tuple[Folder, ...]]:
        options: dict[str, Any] = {"command": ["true"], "network_disabled": True}
        probe = await self.engine.create({"image": image, "labels": self.labels, **options})
        try:
            uid, gid, home = _resolve_user(
                user, await self.engine.get_archive(probe, "/etc/passwd")
            )
            paths = _unique([workdir, home, *SCRATCH])
            folders = [await self._folder(probe, path, uid, gid) for path in paths if path != "/"]
        finally:
            await self.engine.remove(probe)
        return f"{uid}:{gid}", tuple(folders)

    async def _folder(self, probe: str, path: str, uid: int, gid: int) -> Folder:
        archive = await self.engine.get_archive(probe, path, max_bytes=CACHE_MAX_BYTES)
        if archive is None:  # not in the image: the sandbox user's own, empty folder
            return Folder(path, uid, gid)
        with tarfile.open(fileobj=io.BytesIO(archive), mode="r|") as tar:  # may be cut
            top = tar.next()
        if top is None or not top.isdir():
            return Folder(path, uid, gid)  # a file or link there: mounting replaces it
        if len(archive) > CACHE_MAX_BYTES:
            return Folder(path, top.uid, top.gid, large=True)
        return Folder(path, top.uid, top.gid, _relative(archive))


def _relative(archive: bytes | None) -> bytes | None:
    """docker's tar of a folder names every entry under the folder's own name; return
    a tar of the entries relative to the folder, or None when it holds nothing."""
    if archive is None:
        return None
    out = io.BytesIO()
    count = 0
    with (
        tarfile.open(fileobj=io.BytesIO(archive)) as tar,
        tarfile.open(fileobj=out, mode="w") as rel,
    ):
        top = None
        for member in tar:
            if top is None:
                top = member.name
                continue
            member.name = posixpath.relpath(member.name, top)
            if member.islnk():
                member.linkname = posixpath.relpath(member.linkname, top)
            rel.addfile(member, tar.extractfile(member) if member.isfile() else None)
            count += 1
    return out.getvalue() if count else None


def _resolve_user(user: str, passwd_tar: bytes | None) -> tuple[int, int, str | None]:
    """(uid, gid, home) of `user` (a name or uid, with an optional `:group`)."""
    name, _, group = user.partition(":")
    entries = _passwd(passwd_tar)
    entry = next((e for e in entries if name in (e[0], e[1])), None)
    if entry is not None:
        _, uid, gid, home = entry
    elif name.isdigit():
        uid, gid, home = name, name, None
    else:
        uid, gid, home = "0", "0", "/root"
    if group.isdigit():
        gid = group
    return int(uid), int(gid), home


def _passwd(passwd_tar: bytes | None) -> list[tuple[str, str, str, str]]:
    if passwd_tar is None:
        return []
    with tarfile.open(fileobj=io.BytesIO(passwd_tar)) as tar:
        member = tar.next()
        data = tar.extractfile(member) if member is not None else None
        text = data.read().decode(errors="replace") if data is not None else ""
    rows = [line.split(":") for line in text.splitlines()]
    return [(r[0], r[2], r[3], r[5]) for r in rows if len(r) >= 7]


def _unique(paths: list[str | None]) -> list[str]:
    seen: list[str] = []
    for path in paths:
        if path and posixpath.normpath(path) not in seen:
            seen.append(posixpath.normpath(path))
    return seen
