"""Closed integer intervals `(start, end)` with start <= end: merging and measuring."""

from __future__ import annotations

from collections.abc import Iterable

Interval = tuple[int, int]


def _checked(interval: Interval) -> Interval:
    start, end = interval
    if start > end:
        raise ValueError(f"interval {interval} ends before it starts")
    return (start, end)


def merge(intervals: Iterable[Interval]) -> list[Interval]:
    """The union of `intervals` as sorted, disjoint intervals. Intervals that overlap or
    touch (share an end point) merge into one."""
    merged: list[Interval] = []
    for start, end in sorted(_checked(i) for i in intervals):
        if merged and start < merged[-1][1]:
            merged[-1] = (merged[-1][0], max(merged[-1][1], end))
        else:
            merged.append((start, end))
    return merged


def total_length(intervals: Iterable[Interval]) -> int:
    """How much of the number line the intervals cover (each point counted once)."""
    return sum(end - start for start, end in merge(intervals))


def overlaps(a: Interval, b: Interval) -> bool:
    """True when the two intervals share at least one point."""
    (a_start, a_end), (b_start, b_end) = _checked(a), _checked(b)
    return a_start <= b_end and b_start <= a_end
