"""What the pytest processes of one run share: xdist's workers use one Docker engine, so
an image that a session fixture of each worker builds is the same image for all of them.
`shared_use` counts the processes using such a thing (a count in the run's shared
temporary folder, under a file lock), and only the last one to finish removes it: a
worker ending its session had removed the SWE-bench test images while another worker's
test still needed them."""

from __future__ import annotations

import fcntl
import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def shared_use(
    name: str, tmp_path_factory: pytest.TempPathFactory, remove: Callable[[], None]
) -> Iterator[None]:
    """Use `name` while the block runs; the last user of this run calls `remove`,
    holding the lock, so that no other process counts itself in meanwhile and finds
    the thing going. Without xdist, this process is the only user."""
    if "PYTEST_XDIST_WORKER" not in os.environ:
        try:
            yield
        finally:
            remove()
        return
    counter = tmp_path_factory.getbasetemp().parent / f"{name}.users"
    _count(counter, +1, lambda: None)
    try:
        yield
    finally:
        _count(counter, -1, remove)


def _count(counter: Path, delta: int, when_none_left: Callable[[], None]) -> None:
    with counter.open("a+") as file:
        fcntl.flock(file, fcntl.LOCK_EX)
        file.seek(0)
        users = int(file.read() or 0) + delta
        file.seek(0)
        file.truncate()
        file.write(str(users))
        file.flush()
        if users == 0:
            when_none_left()
