"""The network of each phase of a Harbor task, as Harbor 0.26 resolves it.

`[environment].network_mode` (default `public`) is the baseline; `[agent]` and
`[verifier]` each override it with their own `network_mode`. An `allowlist` phase
allows its own `allowed_hosts` and the environment's. In orsbox terms (`SandboxLimits.
network`): `public` is the guarded internet (True), `no-network` only a loopback
interface (False), `allowlist` the hosts through an egress proxy ("allowlist"). The
sandbox starts with the agent phase's network and is switched to the verifier's, when
it differs, after the agent's processes are killed and before the tests are copied in
(`verifier.py`).

The operator decides what a task may ask for: `public` needs `ORSBOX_ALLOW_NETWORK=1`,
`allowlist` `ORSBOX_ALLOW_NETWORK_ALLOWLIST=1` (or the former); a task asking more, in
any phase, is refused at load. What the server's backend cannot give (gVisor's sandboxes
have no network and cannot switch one) is asked of it before the sandbox starts
(`unmet_by`), so such a task fails at setup saying why, not at grading.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from orsbox.formats.harbor.task_config import NetworkMode, TaskConfig
from orsbox.sandbox.capabilities import BackendCapabilities
from orsbox.sandbox.capabilities import NetworkMode as SandboxNetwork

PHASES = ("agent", "verifier")


@dataclass(frozen=True)
class PhaseNetwork:
    network: bool | Literal["allowlist"]
    allowed_hosts: tuple[str, ...] = ()


@dataclass(frozen=True)
class NetworkAllowed:
    """What the operator lets tasks have beyond no network."""

    internet: bool = False
    allowlist: bool = False

    @classmethod
    def from_settings(cls) -> NetworkAllowed:
        from orsbox.settings import Settings

        settings = Settings()
        return cls(settings.allow_network, settings.allow_network_allowlist)


def _resolve(mode: NetworkMode, hosts: list[str]) -> PhaseNetwork:
    if mode is NetworkMode.PUBLIC:
        return PhaseNetwork(True)
    if mode is NetworkMode.ALLOWLIST:
        return PhaseNetwork("allowlist", tuple(dict.fromkeys(hosts)))
    return PhaseNetwork(False)


def phase_networks(config: TaskConfig) -> dict[str, PhaseNetwork]:
    """{"agent": ..., "verifier": ...} for `config`."""
    env = config.environment
    phases = {}
    for phase in PHASES:
        section = getattr(config, phase)
        mode = section.network_mode or env.network_mode
        phases[phase] = _resolve(mode, [*(section.allowed_hosts or []), *(env.allowed_hosts or [])])
    return phases


def refusals(
    config: TaskConfig, phases: dict[str, PhaseNetwork], allowed: NetworkAllowed
) -> Iterator[tuple[str, str]]:
    """(field, why) for each phase network the operator does not allow."""
    for phase, network in phases.items():
        section = getattr(config, phase)
        field = f"{phase}.network_mode" if section.network_mode else "environment.network_mode"
        if network.network is True and not allowed.internet:
            yield (
                field,
                f"the {phase} phase wants the network (Harbor's default is 'public'); this "
                "server does not allow it (allow with ORSBOX_ALLOW_NETWORK=1, or set "
                'network_mode = "no-network" or "allowlist")',
            )
        elif network.network == "allowlist" and not (allowed.allowlist or allowed.internet):
            yield (
                field,
                f"the {phase} phase wants an allow-listed network; this server does not "
                "allow it (allow with ORSBOX_ALLOW_NETWORK_ALLOWLIST=1)",
            )


def widest(networks: list[PhaseNetwork]) -> bool | Literal["allowlist"]:
    """The most any of `networks` reaches: what the server's policy is asked for."""
    if any(n.network is True for n in networks):
        return True
    if any(n.network == "allowlist" for n in networks):
        return "allowlist"
    return False


def unmet_by(
    agent: SandboxNetwork, verifier: PhaseNetwork | None, capabilities: BackendCapabilities
) -> str | None:
    """Why a backend with `capabilities` cannot run a task whose agent phase has the
    network `agent` and whose verifier phase, where it differs, `verifier`; None when
    it can. A backend that isolates nothing (the fake) is not asked."""
    if not capabilities.isolated:
        return None
    offered = capabilities.describe_network()
    asked: list[tuple[str, SandboxNetwork]] = [("the agent phase", agent)]
    if verifier is not None:
        if not capabilities.switch_network:
            return (
                "its verifier's network differs from its agent's, and this server's "
                f"sandboxes cannot change their network while running ({offered})"
            )
        asked.append(("the verifier phase", verifier.network))
    for phase, network in asked:
        if not capabilities.gives_network(network):
            return f"{phase} asks for a network this server's sandboxes cannot have ({offered})"
    return None
