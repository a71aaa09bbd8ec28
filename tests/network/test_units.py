"""The network pieces that need no engine: the guard's rule set, the proxy's config, the
owner comment `orsbox gc` reads back, and the fake backend keeping step."""

from __future__ import annotations

from pathlib import Path

import pytest

from orsbox.sandbox import SandboxLimits, SandboxSpec
from orsbox.sandbox.fake import FakeBackend
from orsbox.sandbox.host import owner as L
from orsbox.sandbox.host.egress import (
    BLOCKED,
    EgressRules,
    host_resolvers,
    owner_comment,
    owner_of,
    parse_cidrs,
)
from orsbox.sandbox.host.proxy import squid_config, squid_domains


def test_forward_rules_allow_dns_and_the_operators_cidrs_before_dropping() -> None:
    rules = EgressRules("s", "ob-x", ["10.20.0.5/32", "fd12::/64"], ["10.255.255.53"])
    forward = rules._forward_rules("iptables")
    assert forward[0] == ["-d", "10.255.255.53", "-p", "udp", "--dport", "53", "-j", "RETURN"]
    allow = forward.index(["-d", "10.20.0.5/32", "-j", "RETURN"])
    first_drop = forward.index(["-d", "169.254.0.0/16", "-j", "DROP"])
    assert allow < first_drop  # accepted before anything is dropped
    assert [r[1] for r in forward if r[-1] == "DROP"] == list(BLOCKED["iptables"])
    assert ["-d", "fd12::/64", "-j", "RETURN"] in rules._forward_rules("ip6tables")
    assert rules._input_rules("iptables")[-1] == ["-j", "DROP"]


def test_cidrs_are_checked_and_normalised() -> None:
    assert parse_cidrs(["10.1.2.3", " 10.1.2.0/24 ", ""]) == ["10.1.2.3/32", "10.1.2.0/24"]
    with pytest.raises(ValueError, match="not an address or CIDR"):
        parse_cidrs(["mirror.internal"])


def test_the_owner_comment_reads_back_as_owner_labels() -> None:
    owner = owner_of(owner_comment("host-1-ab"))
    assert owner[L.SERVER] == "host-1-ab"
    assert not L.owner_is_dead(owner)  # this process


def test_loopback_resolvers_are_left_to_dockers_own(tmp_path: Path) -> None:
    conf = tmp_path / "resolv.conf"
    conf.write_text("nameserver 127.0.0.53\nnameserver 10.0.0.2\nnameserver fe80::1%eth0\n")
    assert host_resolvers(conf) == ["10.0.0.2", "fe80::1"]


def test_the_proxy_refuses_off_list_names_before_any_lookup(tmp_path: Path) -> None:
    config = squid_config(
        tmp_path, "172.30.0.1", 3128, "172.30.0.2", ["pypi.org", "*.debian.org"],
        [], ["10.0.0.0/8"], None,
    )  # fmt: skip
    lines = config.splitlines()
    assert "acl listed dstdomain -n pypi.org .debian.org" in lines  # -n: no lookup
    allow = lines.index("http_access allow sandbox listed !guarded")
    assert lines[-1] == "http_access deny all" and allow < len(lines) - 1
    assert "acl sandbox src 172.30.0.2/32" in lines
    nothing = squid_config(tmp_path, "172.30.0.1", 3128, "172.30.0.2", [], [], [], None)
    assert "http_access allow" not in nothing
    assert squid_domains(["*.a.org", "b.org"]) == [".a.org", "b.org"]


@pytest.mark.fake
@pytest.mark.anyio
async def test_the_fake_records_the_network_it_was_asked_for() -> None:
    backend = FakeBackend()
    limits = SandboxLimits(network="allowlist", allowed_hosts=("pypi.org",))
    sandbox = await backend.start(SandboxSpec(image="any", limits=limits))
    try:
        assert sandbox.network == ("allowlist", ("pypi.org",))
        await sandbox.set_network(True)
        assert sandbox.network == (True, ())
    finally:
        await backend.close()


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"
