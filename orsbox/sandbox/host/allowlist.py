"""The allow-list's gate: where a sandbox whose only way out is its egress proxy meets it.

The backend puts such sandboxes on a bridge of their own that forwards nothing past the
host (Docker: an internal network, `orsbox.sandbox.docker.allowlist`). The host is still
reachable on the bridge's gateway address, so an INPUT chain of the server's own
(`ORSBOX-P-<id>`, its jump carrying the owner comment that `orsbox gc` reads, as in
`egress.py`) drops everything from the bridge except, per sandbox, a connection from its
address to its own proxy's port (`proxy.py`). A sandbox therefore reaches exactly the
hosts its proxy lets through, and nothing on the host or of another sandbox's list.
"""

from __future__ import annotations

from collections.abc import Sequence

import anyio

from orsbox.errors import SandboxError
from orsbox.sandbox.host.egress import (
    available_tools,
    chain_suffix,
    delete_rule,
    drop_chain,
    guard_rules,
    host_addresses,
    iptables,
    owner_comment,
)
from orsbox.sandbox.host.proxy import EgressProxy


def proxy_env(url: str) -> dict[str, str]:
    """What a sandbox's processes need to go out through `url` (apt, curl, pip and
    Python's urllib all read these)."""
    local = "localhost,127.0.0.1,::1"
    return {
        "http_proxy": url,
        "https_proxy": url,
        "HTTP_PROXY": url,
        "HTTPS_PROXY": url,
        "no_proxy": local,
        "NO_PROXY": local,
    }


class ProxyGate:
    """One server's INPUT rules for its allow-list bridge, and its sandboxes' proxies,
    each listening on the bridge's `gateway` (set by the backend once the bridge is up)."""

    def __init__(
        self, server_id: str, bridge: str, allow_cidrs: Sequence[str], hosts_file: str | None
    ) -> None:
        self.server_id = server_id
        self.bridge = bridge
        self.chain = f"ORSBOX-P-{chain_suffix(server_id)}"
        self.allow_cidrs = list(allow_cidrs)
        self.hosts_file = hosts_file
        self.gateway: str | None = None
        self._proxies: dict[str, EgressProxy] = {}  # sandbox id -> its proxy

    def install(self) -> None:
        """Drop everything from the bridge to the host but replies (blocking)."""
        self.remove()
        comment = owner_comment(self.server_id)
        for tool in available_tools():
            iptables(tool, "-N", self.chain)
            iptables(tool, "-A", self.chain, "-m", "conntrack", "--ctstate",
                     "ESTABLISHED,RELATED", "-j", "RETURN")  # fmt: skip
            iptables(tool, "-A", self.chain, "-j", "DROP")
            iptables(tool, "-I", "INPUT", "1", "-i", self.bridge,
                     "-m", "comment", "--comment", comment, "-j", self.chain)  # fmt: skip

    def remove(self) -> None:
        """Remove this server's INPUT rules (blocking); never raises for rules gone."""
        for rule in guard_rules():
            if rule.chain == self.chain:
                delete_rule(rule)
        for tool in available_tools():
            drop_chain(tool, self.chain)

    async def open(self, sandbox_id: str, address: str, hosts: Sequence[str]) -> str:
        """Start the proxy of the sandbox at `address`, let it (only it) reach it, and
        return its URL."""
        await self.close_proxy(sandbox_id)
        gateway = self.gateway
        if gateway is None:
            raise SandboxError("the allow-list network is not set up")
        proxy = await anyio.to_thread.run_sync(
            lambda: EgressProxy.start(
                gateway,
                address,
                hosts,
                allow_cidrs=self.allow_cidrs,
                host_addresses=host_addresses(),
                hosts_file=self.hosts_file,
                owner=self.server_id,
            )
        )
        self._proxies[sandbox_id] = proxy
        try:
            await anyio.to_thread.run_sync(
                lambda: iptables("iptables", "-I", self.chain, "1", *self._way_to(proxy))
            )
        except BaseException:
            await self.close_proxy(sandbox_id)
            raise
        return proxy.url

    def _way_to(self, proxy: EgressProxy) -> list[str]:
        """The rule letting the proxy's sandbox, and only it, connect to the proxy."""
        return [
            "-s", proxy.client, "-d", str(self.gateway),
            "-p", "tcp", "--dport", str(proxy.port), "-j", "RETURN",
        ]  # fmt: skip

    def proxy_of(self, sandbox_id: str) -> EgressProxy | None:
        return self._proxies.get(sandbox_id)

    async def close_proxy(self, sandbox_id: str) -> None:
        """Stop the sandbox's proxy and close its way to it. Idempotent."""
        proxy = self._proxies.pop(sandbox_id, None)
        if proxy is None:
            return

        def stop() -> None:
            iptables("iptables", "-D", self.chain, *self._way_to(proxy), check=False)
            proxy.stop()

        with anyio.CancelScope(shield=True):
            await anyio.to_thread.run_sync(stop)

    async def close(self) -> None:
        """Stop every proxy, then remove the rules (where the bridge was set up)."""
        for sandbox_id in list(self._proxies):
            await self.close_proxy(sandbox_id)
        if self.gateway is not None:
            await anyio.to_thread.run_sync(self.remove)
            self.gateway = None
