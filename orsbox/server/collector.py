"""The cyclic garbage collector, set for a server that runs for days, and watched.

A full collection walks every object the collector tracks and holds the event loop
while it does: every call in flight waits it out. Most of what a started server holds
never becomes garbage (its modules, classes, routes and clients: about 100,000 tracked
objects), so it is moved out of the collector's reach once, when the server has
started (`gc.freeze`). A full pass then walks only what the server made since, which
is what the live sessions hold (docs/operating/sizing.md has the pauses before and
after).

Each pass's duration goes to a histogram by generation (`watch_collector`), so an
operator sees a collector pause beside the event loop's lag (`orsbox.monitoring.loop_lag`)
instead of inferring it: at 1,000 live episodes, full passes of 166-515 ms were the
paced call p99's cause before the reconnect buffer stopped holding tracked objects.
"""

from __future__ import annotations

import gc
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from prometheus_client import Histogram


def settle_collector() -> None:
    """Collect what startup left, then exempt what remains from later passes."""
    gc.collect()
    gc.freeze()


@contextmanager
def watch_collector(histogram: Histogram) -> Iterator[None]:
    """While inside: every collection's wall time into `histogram`, labelled with its
    generation. The callback is the process's (`gc.callbacks`), so it is removed on
    the way out: in-process servers in tests come and go."""
    started: dict[int, float] = {}
    for generation in range(len(gc.get_count())):  # reported from the start, at 0
        histogram.labels(str(generation))

    def on_collection(phase: str, info: dict[str, Any]) -> None:
        generation = info["generation"]
        if phase == "start":
            started[generation] = time.perf_counter()
        elif generation in started:
            histogram.labels(str(generation)).observe(time.perf_counter() - started.pop(generation))

    gc.callbacks.append(on_collection)
    try:
        yield
    finally:
        gc.callbacks.remove(on_collection)
