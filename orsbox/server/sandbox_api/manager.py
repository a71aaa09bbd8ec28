"""`SandboxManager`: the sandboxes clients created through the sandbox API.

Life of one:

    /create_sandbox ──► starting ──started──► ready ──/delete_session, idle, shutdown──► gone
                            └──start failed──► failed ─────────────┘

Each belongs to the client that created it (`orsbox.server.owners`: a token, or the
client of the session whose environment asked for it): another client asking for its
id gets the same 404 as for an id that never existed, also once it is gone. Requests
during the start wait for it at most `setup_wait_s`, then get 503 with
`X-Backend-State: starting`; its owner's requests for a deleted, reaped or dead sandbox
get 410. A sandbox no request named for
`sandbox_timeout_s` (and with no command running) is removed. Each client may hold at
most `sandbox_max_per_client` live sandboxes (past it, 403). Idleness and the reaper's
pace read the manager's clock (`orsbox.clock`), which a test may move by hand.
"""

from __future__ import annotations

import asyncio
import logging
from collections import OrderedDict
from dataclasses import dataclass, field

from orsbox.clock import SYSTEM_CLOCK, Clock, wait_for_event
from orsbox.errors import (
    Forbidden,
    Gone,
    ImageNotFound,
    NotFound,
    SandboxError,
    ServiceUnavailable,
)
from orsbox.sandbox.base import Sandbox, SandboxBackend, SandboxSpec
from orsbox.sandbox.image_map import ImageMap
from orsbox.server.cells import check_owned, mint
from orsbox.server.observer import Observer
from orsbox.settings import Settings

log = logging.getLogger("orsbox.sandbox_api")

SANDBOX_ID_PREFIX = "sbx-"
REMEMBERED_GONE = 10_000


@dataclass(eq=False)
class ApiSandbox:
    id: str
    owner: str
    image: str
    has_network_policy: bool
    ready: asyncio.Event = field(default_factory=asyncio.Event)
    sandbox: Sandbox | None = None
    error: str | None = None
    image_named: str = ""  # as asked and as mapped (`policy.image_mapping`)
    start_task: asyncio.Task[None] | None = None
    clock: Clock = SYSTEM_CLOCK
    last_active: float = 0.0  # any request naming it (set at creation)
    in_flight: int = 0

    def __post_init__(self) -> None:
        self.touch()

    def touch(self) -> None:
        self.last_active = self.clock.monotonic()


class SandboxManager:
    """`backend` is the server's metered one (`create_app`), so these sandboxes' starts
    are counted with the sessions'; `observer` counts their `/run` calls. `images` is the
    sandbox API's one image map (`Settings.image_map`), read once: what a client asks
    for is mapped by it once, and the mapped name is judged and started."""

    def __init__(
        self,
        settings: Settings,
        backend: SandboxBackend,
        observer: Observer | None = None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.settings = settings
        self.clock = clock
        self.backend = backend
        self.observer = observer or Observer.unattached()
        self.images = ImageMap.parse(settings.image_map)
        self._live: dict[str, ApiSandbox] = {}
        self._gone: OrderedDict[str, tuple[str, str]] = OrderedDict()  # id -> owner, why

    def __len__(self) -> int:
        return len(self._live)

    @staticmethod
    def is_sandbox_id(sid: str) -> bool:
        return sid.startswith(SANDBOX_ID_PREFIX)

    # -- create -----------------------------------------------------------------------
    def create(
        self, owner: str, spec: SandboxSpec, has_network_policy: bool, image: str = ""
    ) -> ApiSandbox:
        """`image`: the image as asked and as mapped, named when it cannot be found."""
        self._check_cap(owner)
        box = ApiSandbox(spec.session_id, owner, spec.image, has_network_policy, clock=self.clock)
        box.image_named = image or f"image {spec.image!r}"
        self._live[box.id] = box
        box.start_task = asyncio.create_task(self._start(box, spec))
        return box

    def new_id(self) -> str:
        """A sandbox id naming this cell (`orsbox.server.cells`)."""
        return mint(self.settings.cell, SANDBOX_ID_PREFIX)

    def _check_cap(self, owner: str) -> None:
        if len(self._live) >= self.settings.max_sessions:
            raise ServiceUnavailable(
                f"server at capacity: {len(self._live)} live sandboxes (max "
                f"{self.settings.max_sessions}); retry later",
                headers={"Retry-After": str(self.settings.capacity_retry_after_s)},
            )
        held = self.held(owner)
        if held >= self.settings.sandbox_max_per_client:
            raise Forbidden(
                f"this client ({owner}) holds {held} sandboxes, the most allowed "
                f"(ORSBOX_SANDBOX_MAX_PER_CLIENT={self.settings.sandbox_max_per_client}); "
                "stop one first"
            )

    async def _start(self, box: ApiSandbox, spec: SandboxSpec) -> None:
        try:
            box.sandbox = await self.backend.start(spec)
            log.info("sandbox %s started from %s", box.id, spec.image)
        except SandboxError as e:
            box.error = f"the sandbox could not start: {e}"
            if isinstance(e, ImageNotFound):
                box.error += f"; asked for {box.image_named}"
            log.warning("sandbox %s: %s", box.id, box.error)
        finally:
            box.touch()
            box.ready.set()

    # -- lookup -----------------------------------------------------------------------
    def get(self, owner: str, sid: str) -> ApiSandbox:
        box = self._live.get(sid)
        if box is not None and box.owner == owner:
            box.touch()
            return box
        check_owned(sid, self.settings.cell, "sandbox")
        gone = self._gone.get(sid)
        if box is None and gone is not None and gone[0] == owner:
            raise Gone(f"sandbox {sid!r} is gone: {gone[1]}")
        raise NotFound(f"no sandbox {sid!r} for this client")

    def held(self, owner: str) -> int:
        """Live sandboxes of client `owner` (what `sandbox_max_per_client` caps)."""
        return sum(1 for b in self._live.values() if b.owner == owner)

    async def running(self, owner: str, sid: str) -> tuple[ApiSandbox, Sandbox]:
        """The sandbox once started: 503 (starting) after `setup_wait_s`, 410 when it
        failed to start or died."""
        box = self.get(owner, sid)
        if not await wait_for_event(self.clock, box.ready, self.settings.setup_wait_s):
            raise ServiceUnavailable(
                "the sandbox is still starting; retry shortly",
                headers={
                    "Retry-After": str(self.settings.setup_retry_after_s),
                    "X-Backend-State": "starting",
                },
            )
        if box.sandbox is None or not box.sandbox.alive:
            why = box.error or "the container is no longer running"
            await self.delete(box.id, why=why)
            raise Gone(f"sandbox {sid!r} is gone: {why}")
        return box, box.sandbox

    # -- delete -----------------------------------------------------------------------
    async def delete(self, sid: str, *, why: str = "it was deleted") -> bool:
        """Remove the sandbox; True if there was one. Idempotent."""
        box = self._live.pop(sid, None)
        if box is None:
            return False
        self._gone[sid] = (box.owner, why)
        while len(self._gone) > REMEMBERED_GONE:
            self._gone.popitem(last=False)
        if box.start_task is not None and not box.start_task.done():
            box.start_task.cancel()
            await asyncio.gather(box.start_task, return_exceptions=True)
        if box.sandbox is not None:
            try:
                await box.sandbox.close()
            except SandboxError as e:
                log.warning("sandbox %s: could not remove it: %s", sid, e)
        log.info("sandbox %s removed (%s)", sid, why)
        return True

    def idle(self, now: float | None = None) -> list[str]:
        now = self.clock.monotonic() if now is None else now
        limit = self.settings.sandbox_timeout_s
        return [
            b.id
            for b in self._live.values()
            if b.ready.is_set() and b.in_flight == 0 and now - b.last_active > limit
        ]

    async def reap_forever(self) -> None:
        while True:
            await self.clock.sleep(self.settings.reap_interval_s)
            why = f"no request for {self.settings.sandbox_timeout_s:g}s"
            await asyncio.gather(*(self.delete(sid, why=why) for sid in self.idle()))

    async def close_all(self) -> None:
        why = "the server shut down"
        await asyncio.gather(*(self.delete(sid, why=why) for sid in list(self._live)))
