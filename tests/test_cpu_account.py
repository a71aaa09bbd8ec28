"""The CPU account's bucketing of py-spy samples (bench/cpu_account.py), on folded
stacks in the shape `py-spy record --format raw` writes."""

from __future__ import annotations

import pytest

from bench.cpu_account import EVENT_LOOP, OTHER, shares

HEAD = 'process 7:"python -m orsbox.cli.main serve";thread (0x7f01)'
LIB = "/usr/lib/python3.11"
PKG = f"{LIB}/site-packages"
ORS = "/work/orsbox/orsbox"
LOOP = f"run ({PKG}/uvloop/__init__.py:82);_run_once ({LIB}/asyncio/base_events.py:1922)"
SSE_WRITE = f"{LOOP};send ({ORS}/protocol/sse.py:40);write ({LIB}/asyncio/selector_events.py:1050)"
PARSE = f"{LOOP};data_received ({PKG}/uvicorn/protocols/http/httptools_impl.py:151)"
GUEST = f"{LOOP};call ({ORS}/sandbox/guest/channel.py:88);dumps ({LIB}/json/__init__.py:231)"
BARE = f"wait ({LIB}/threading.py:331)"


def test_samples_go_to_the_innermost_named_component_and_the_stdlib_to_its_caller() -> None:
    folded = "\n".join(
        f"{HEAD};{stack} {n}"
        for stack, n in [(SSE_WRITE, 30), (PARSE, 20), (GUEST, 40), (LOOP, 5), (BARE, 5)]
    )
    found, leaves = shares(folded + "\nnot a sample line\n")
    assert found == pytest.approx(
        {
            "SSE response (orsbox/protocol, event_stream.py)": 0.30,
            "HTTP/1.1 parsing and writing (uvicorn, httptools)": 0.20,
            "guest channel: framing, JSON, the exec stream": 0.40,
            EVENT_LOOP: 0.05,
            OTHER: 0.05,
        }
    )
    assert leaves[0] == (f"dumps ({LIB}/json/__init__.py:231)", 40)
