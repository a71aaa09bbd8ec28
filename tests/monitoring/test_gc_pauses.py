"""`orsbox_gc_pause_seconds` (orsbox.server.collector): a full collection on a real
server shows up with its duration, and the hook goes when its server does."""

from __future__ import annotations

import gc
from pathlib import Path

from prometheus_client import CollectorRegistry, Histogram

from orsbox.server.collector import watch_collector
from tests.monitoring.conftest import Episode
from tests.monitoring.test_metrics import scrape, value
from tests.servers import start_server

PAUSE = "orsbox_gc_pause_seconds"
HOG = "tests/fixture_envs/loop_envs.py:LoopHog"
OBJECTS = 500_000  # a full pass over them takes 10-40 ms


def full_passes(samples: dict, le: str = "+Inf") -> float:
    return value(samples, f"{PAUSE}_bucket", generation="2", le=le)


def test_a_full_collection_is_counted_with_its_duration(tmp_path: Path) -> None:
    server = start_server([HOG], tmp_path, record_episodes=False)
    try:
        before = scrape(server)
        episode = Episode(server, "LoopHog")
        episode.create(task_spec={})
        assert episode.call("collect_garbage", objects=OBJECTS).result()["ok"]
        after = scrape(server)
        assert full_passes(after) - full_passes(before) >= 1
        slow = (full_passes(after) - full_passes(after, "0.005")) - (
            full_passes(before) - full_passes(before, "0.005")
        )
        assert slow >= 1, f"no full pass over 5 ms while {OBJECTS} more objects were walked"
        walked = value(after, f"{PAUSE}_sum", generation="2")
        assert walked - value(before, f"{PAUSE}_sum", generation="2") >= 0.005
        episode.delete()
    finally:
        server.stop()


def full_pass_count(histogram: Histogram) -> float:
    [family] = histogram.collect()
    return next(
        sample.value
        for sample in family.samples
        if sample.name.endswith("_count") and sample.labels == {"generation": "2"}
    )


def test_the_hook_is_removed_on_the_way_out() -> None:
    histogram = Histogram("pauses", "test", ["generation"], registry=CollectorRegistry())
    hooks = list(gc.callbacks)
    with watch_collector(histogram):
        assert len(gc.callbacks) == len(hooks) + 1
        assert full_pass_count(histogram) == 0  # there before the first pass
        gc.collect()
    assert gc.callbacks == hooks
    assert full_pass_count(histogram) == 1
    gc.collect()
    assert full_pass_count(histogram) == 1, "a pass after the way out was counted"
