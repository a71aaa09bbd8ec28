"""What a backend can do, asked before a sandbox starts rather than learnt from a failure.

The server's policy refuses an environment at load time when it asks for what the
backend cannot give (a runtime where the backend has no choice of runtime); a caller
that would switch a running sandbox's network, start one with an allow-list or save it
as a snapshot can ask first too. Each backend answers for itself
(`SandboxBackend.capabilities`), so no caller decides by the backend's kind.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

NetworkMode = bool | Literal["host", "allowlist"]  # the values of `SandboxLimits.network`
EVERY_NETWORK_MODE: frozenset[NetworkMode] = frozenset({False, True, "host", "allowlist"})


@dataclass(frozen=True)
class BackendCapabilities:
    """What a backend offers, as configured.

    `isolated`: sandboxes are apart from the host and held to their limits (memory,
    pids, network); the fake's are host processes and are not.
    `network_modes`: the `SandboxLimits.network` values a sandbox starts with as asked
    (under the configured runtime); `switch_network`: `Sandbox.set_network` changes a
    running sandbox's network.
    `runtime_choice`: sandboxes run under an OCI runtime chosen per sandbox;
    `runtime` is the configured one (None: the engine's default) and `allowed_runtimes`
    those an environment may ask for besides (the operator's allow-list).
    `snapshots`: a running sandbox can be saved and started again (`backend.snapshots`).
    `engine`: what serves the sandboxes, where that limits them (`Podman 4.3.1`: no
    guarded network, docs/backends.md), for messages; None otherwise.
    `bridge`: the host's interface that sandboxes with a network of their own
    (`network=True`) are bridged through (Docker: the guarded network's `ob-...`), while
    one is; None where none is offered. A sandbox with the host's network sees it.
    `runtime_default_caps`: the capability set root keeps under
    `privileges="runtime-default"`, as /proc/<pid>/status shows it (`CapEff`, in hex;
    Docker's default set is `00000000a80425fb`); None where the backend cannot say.
    """

    isolated: bool
    network_modes: frozenset[NetworkMode]
    switch_network: bool
    runtime_choice: bool
    snapshots: bool
    runtime: str | None = None
    allowed_runtimes: tuple[str, ...] = ()
    engine: str | None = None
    bridge: str | None = None
    runtime_default_caps: str | None = None

    def offers_runtime(self, runtime: str) -> bool:
        """An environment may ask for `runtime`: the configured one or an allowed one."""
        return self.runtime_choice and (runtime == self.runtime or runtime in self.allowed_runtimes)

    def gives_network(self, network: NetworkMode) -> bool:
        """A sandbox may start with `network`: no network is always given, and a backend
        that isolates nothing (the fake) holds no network back to refuse."""
        return not self.isolated or not network or network in self.network_modes

    def describe_network(self) -> str:
        """The network modes offered, for an error: e.g. `offered: none (gVisor: docs/gvisor.md)`."""
        names = {False: "none", True: "guarded", "host": "host", "allowlist": "allow-list"}
        offered = ", ".join(sorted(names[m] for m in self.network_modes)) or "none"
        if self.runtime and self.runtime.startswith("runsc"):
            return f"network modes offered: {offered} (gVisor: docs/gvisor.md)"
        if self.engine:
            return f"network modes offered: {offered} ({self.engine}: docs/backends.md)"
        return f"network modes offered: {offered}"
