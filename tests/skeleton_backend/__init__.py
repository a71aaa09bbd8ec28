"""A backend that is only its seam: the files a pod-per-session backend adds
(docs/backends.md, "The file count"), each implementing its part of the contract with
`NotImplementedError`, importing nothing outside the neutral contract
(tests/test_layering.py holds it to that).

This package is what `orsbox/sandbox/kubernetes/__init__.py` would be: the config, the
one thing the factory imports. Registering it is one entry in
`orsbox.sandbox.config.BACKENDS` (the tests add it with monkeypatch); with that alone
`ORSBOX_BACKEND='{"type": "skeleton"}'` selects it, the factory makes it, the CLI offers
its flags and `orsbox doctor` asks it (tests/test_backend_config.py).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, ClassVar, Literal

from pydantic import Field

from orsbox.sandbox.backend_config import BackendConfig
from orsbox.sandbox.diagnosis import EngineCheck

if TYPE_CHECKING:
    from tests.skeleton_backend.backend import SkeletonBackend


class SkeletonConfig(BackendConfig):
    """Sandboxes as pods of one namespace (on paper)."""

    type: Literal["skeleton"] = "skeleton"
    namespace: str = Field(default="orsbox", description="the namespace sandbox pods run in")
    runtime_class: str | None = Field(
        default=None, description="the RuntimeClass every sandbox pod runs under, e.g. gvisor"
    )

    flags: ClassVar[tuple[str, ...]] = ("namespace", "runtime_class")
    title: ClassVar[str] = "Skeleton cluster"

    def create(
        self, *, server_id: str | None = None, start_concurrency: int | None = None
    ) -> SkeletonBackend:
        from tests.skeleton_backend.backend import SkeletonBackend

        return SkeletonBackend(self, server_id)

    def unreachable(self, error: Exception) -> EngineCheck:
        detail = f"no cluster answers for namespace {self.namespace}: {error!r}"
        return EngineCheck(self.title, False, detail, "point KUBECONFIG at a cluster")
