"""Prometheus metrics, in the text format every monitoring stack reads
(`prometheus-client` renders it; a registry of our own per server, so two servers in
one process never share counts).

Counters and histograms are updated as things happen; what is a state rather than an
event (live sessions by environment and state, the warm pool, the engine's health) is
read when scraped (`StateCollector`), so it can never drift from the truth.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Histogram, generate_latest
from prometheus_client import Counter as PromCounter
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from orsbox.sandbox.image_cache import ImageCacheStats

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# Tool calls run from milliseconds (a file read) to minutes (a test suite).
CALL_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 900)
START_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120)
# From what an idle event loop shows (under a millisecond) to one stalled for seconds.
LAG_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10)

OUTCOMES = ("ok", "tool_error", "raised", "grading_error", "timed_out", "truncated")


@dataclass(frozen=True)
class State:
    """What the server is now, as the scrape reads it."""

    sessions: Counter[tuple[str, str]]  # (environment, state) -> how many
    warm_idle: int | None  # None: no warm pool
    warm_hits: int
    warm_misses: int
    engine_up: bool | None  # None: no sandbox backend
    records_dropped: int
    # environment -> idle seconds of each ready session with no call in flight
    idle: dict[str, list[float]] = field(default_factory=dict)


class StateCollector(Collector):
    def __init__(self, read: Callable[[], State]) -> None:
        self.read = read

    def collect(self) -> Iterable[Metric]:
        state = self.read()
        live = GaugeMetricFamily(
            "orsbox_sessions",
            "Live sessions by environment and state",
            labels=["environment", "state"],
        )
        for (env, st), n in sorted(state.sessions.items()):
            live.add_metric([env, st], n)
        yield live
        yield from _idle_metrics(state.idle)
        if state.warm_idle is not None:
            yield GaugeMetricFamily(
                "orsbox_warm_pool_idle", "Idle sandboxes in the warm pool", value=state.warm_idle
            )
            yield CounterMetricFamily(
                "orsbox_warm_pool_hits",
                "Sandbox starts served from the warm pool",
                value=state.warm_hits,
            )
            yield CounterMetricFamily(
                "orsbox_warm_pool_misses",
                "Sandbox starts that found the pool empty",
                value=state.warm_misses,
            )
        if state.engine_up is not None:
            yield GaugeMetricFamily(
                "orsbox_engine_up", "1 when the sandbox engine answers", value=int(state.engine_up)
            )
        yield CounterMetricFamily(
            "orsbox_episode_records_dropped",
            "Episode records not written (database full, locked or unwritable)",
            value=state.records_dropped,
        )


class ImageCacheCollector(Collector):
    """The pulled images (`orsbox.sandbox.image_cache`), read at each scrape."""

    def __init__(self, read: Callable[[], ImageCacheStats]) -> None:
        self.read = read

    def collect(self) -> Iterable[Metric]:
        s = self.read()
        counters = (
            (
                "orsbox_image_pulls",
                "Image pulls run (one per image per burst of sessions)",
                s.pulls,
            ),
            ("orsbox_image_pull_failures", "Image pulls that failed", s.pull_failures),
            ("orsbox_image_pulled_bytes", "Bytes of the images pulled", s.bytes_pulled),
            ("orsbox_image_cache_hits", "Sandbox starts that found their image", s.hits),
            ("orsbox_image_cache_misses", "Sandbox starts that did not find their image", s.misses),
            ("orsbox_image_evictions", "Pulled images removed over the disk budget", s.evictions),
        )
        for name, text, value in counters:
            yield CounterMetricFamily(name, text, value=value)
        yield GaugeMetricFamily(
            "orsbox_image_disk_bytes", "Disk the images this server pulled take", value=s.disk_bytes
        )
        yield GaugeMetricFamily("orsbox_images_pulled", "Pulled images held", value=s.images)
        if s.budget_bytes is not None:
            yield GaugeMetricFamily(
                "orsbox_image_disk_budget_bytes",
                "The disk budget of pulled images (--image-disk-budget)",
                value=s.budget_bytes,
            )


def _idle_metrics(idle: dict[str, list[float]]) -> Iterable[Metric]:
    """How many sessions wait for their client, and the longest wait: a trainer's
    sessions wait while its model thinks, an abandoned one's wait grows until the
    lease or the inactivity timeout ends it."""
    count = GaugeMetricFamily(
        "orsbox_sessions_idle",
        "Ready sessions with no call in flight, by environment",
        labels=["environment"],
    )
    oldest = GaugeMetricFamily(
        "orsbox_sessions_idle_oldest_seconds",
        "The longest time a ready session has gone without a call or request (pings "
        "aside), by environment",
        labels=["environment"],
    )
    for env, ages in sorted(idle.items()):
        count.add_metric([env], len(ages))
        oldest.add_metric([env], max(ages, default=0.0))
    yield count
    yield oldest


class Metrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        r = self.registry
        self.session_starts = PromCounter(
            "orsbox_session_starts", "Sessions created", ["environment"], registry=r
        )
        self.session_failures = PromCounter(
            "orsbox_session_failures",
            "Sessions refused or whose setup failed, by cause",
            ["environment", "cause"],
            registry=r,
        )
        self.sessions_reaped = PromCounter(
            "orsbox_sessions_reaped",
            "Sessions the server ended: its client stopped pinging (lease) or no request "
            "came (inactivity)",
            ["environment", "reason"],
            registry=r,
        )
        self.tool_calls = PromCounter(
            "orsbox_tool_calls",
            "Tool calls by outcome",
            ["environment", "tool", "outcome"],
            registry=r,
        )
        self.grading_errors = PromCounter(
            "orsbox_grading_errors",
            "Gradings that could not run (no reward), by cause (GradingError.cause)",
            ["environment", "cause"],
            registry=r,
        )
        self.call_seconds = Histogram(
            "orsbox_tool_call_duration_seconds",
            "Server-side time of a tool call, from arrival to result",
            ["environment"],
            buckets=CALL_BUCKETS,
            registry=r,
        )
        self.exec_seconds = Histogram(
            "orsbox_sandbox_exec_duration_seconds",
            "Time one command ran inside a sandbox, as its guest measured it",
            ["environment"],
            buckets=CALL_BUCKETS,
            registry=r,
        )
        self.sandbox_starts = PromCounter(
            "orsbox_sandbox_starts", "Sandbox starts by outcome", ["outcome"], registry=r
        )
        self.sandbox_start_seconds = Histogram(
            "orsbox_sandbox_start_duration_seconds",
            "Time to get a running sandbox (warm pool hits included)",
            buckets=START_BUCKETS,
            registry=r,
        )
        self.loop_lag_seconds = Histogram(
            "orsbox_event_loop_lag_seconds",
            "How much later than asked the server's event loop woke from a short sleep "
            "(orsbox.monitoring.loop_lag): time every request waited on the loop",
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.collector_pause_seconds = Histogram(
            "orsbox_gc_pause_seconds",
            "Wall time of each cyclic garbage collection in the server, by generation "
            "(orsbox.server.collector): the event loop waits it out",
            ["generation"],
            buckets=LAG_BUCKETS,
            registry=r,
        )
        self.output_capped_bytes = PromCounter(
            "orsbox_output_capped_bytes",
            "Bytes of command output cut by output caps",
            ["environment"],
            registry=r,
        )

    def watch(self, read: Callable[[], State]) -> None:
        """Report the server's state from `read` at every scrape."""
        self.registry.register(StateCollector(read))

    def watch_images(self, read: Callable[[], ImageCacheStats]) -> None:
        """Report the pulled images' counts from `read` at every scrape."""
        self.registry.register(ImageCacheCollector(read))

    def render(self) -> bytes:
        return generate_latest(self.registry)
