"""The server's own event-loop lag over a stretch of a benchmark, from its metric
`orsbox_event_loop_lag_seconds` (orsbox.monitoring.loop_lag): scrape `/metrics` before
and after, and read p50, p99 and max from the difference of the histogram's buckets.

Quantiles are interpolated inside a bucket, as Prometheus's `histogram_quantile` does;
the max is the upper bound of the highest bucket that got a sample (a histogram keeps
no exact max), so it reads "at most"."""

from __future__ import annotations

import math

from bench.client import metric_samples

LAG = "orsbox_event_loop_lag_seconds"

Buckets = dict[float, float]  # upper bound (s) -> cumulative count


async def scrape(url: str) -> Buckets:
    """The lag histogram's cumulative buckets now."""
    return {
        float(sample.labels["le"]): sample.value
        for sample in await metric_samples(url)
        if sample.name == f"{LAG}_bucket"
    }


def between(before: Buckets, after: Buckets) -> dict[str, float]:
    """n, p50, p99 and max (ms) of the samples taken between two scrapes."""
    delta = sorted((le, after[le] - before.get(le, 0.0)) for le in after)
    n = delta[-1][1] if delta else 0.0
    return {
        "n": n,
        "p50": quantile(delta, 0.5) * 1000,
        "p99": quantile(delta, 0.99) * 1000,
        "max": highest(delta) * 1000,
    }


def quantile(delta: list[tuple[float, float]], q: float) -> float:
    n = delta[-1][1] if delta else 0.0
    if n == 0:
        return math.nan
    rank, lower, below = q * n, 0.0, 0.0
    for le, count in delta:
        if count >= rank:
            if math.isinf(le):
                return lower  # past the last finite bound: all we know
            return lower + (le - lower) * (rank - below) / max(count - below, 1e-12)
        lower, below = le, count
    return lower


def highest(delta: list[tuple[float, float]]) -> float:
    """The upper bound of the highest bucket that got a sample (inf past the last
    finite bound); NaN when none did."""
    below = [0.0, *(count for _, count in delta)]
    filled = [le for (le, count), under in zip(delta, below, strict=False) if count > under]
    return filled[-1] if filled else math.nan
