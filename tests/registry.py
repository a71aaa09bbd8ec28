"""A private image registry on loopback, for the tests that pull: the cluster's own
(`orsbox.cluster.registry.LocalRegistry`, Debian's `docker-registry`) serving a folder of
the test's own on 127.0.0.1. Docker engines treat 127.0.0.0/8 registries as insecure
(plain HTTP) by default, so every engine on this host can push to it and pull from it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from orsbox.cluster.registry import RegistryError, start_on_free_port


@contextlib.contextmanager
def local_registry(folder: Path) -> Iterator[str]:
    """A registry storing into `folder`, running while the block runs; yields its
    address (`127.0.0.1:PORT`, the prefix of the image names it serves)."""
    try:
        registry = start_on_free_port(folder / "registry")
    except RegistryError as e:
        pytest.fail(f"the loopback registry did not start (scripts/test.sh installs it): {e}")
    try:
        yield registry.address
    finally:
        registry.stop()
