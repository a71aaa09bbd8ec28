"""The skeleton's sandbox: every verb is the guest's (`GuestSandbox`); only what the
deployment knows is left, and it is not written."""

from __future__ import annotations

from orsbox.sandbox.guest.sandbox import GuestSandbox


class SkeletonSandbox(GuestSandbox):
    async def _remove(self) -> None:
        raise NotImplementedError("delete the pod")

    async def _why_gone(self) -> str:
        raise NotImplementedError("read the pod's status: OOMKilled, Evicted, deleted")
