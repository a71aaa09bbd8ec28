"""Descriptive statistics for sequences of numbers."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable


def _data(values: Iterable[float], what: str) -> list[float]:
    data = list(values)
    if not data:
        raise ValueError(f"{what} of an empty sequence")
    return data


def mean(values: Iterable[float]) -> float:
    """The arithmetic mean."""
    data = _data(values, "mean")
    return math.fsum(data) / len(data)


def median(values: Iterable[float]) -> float:
    """The middle value; for an even number of values, the mean of the two middle ones."""
    data = sorted(_data(values, "median"))
    middle = len(data) // 2
    if len(data) % 2 == 1:
        return data[middle]
    return (data[middle] + data[middle + 1]) / 2


def mode(values: Iterable[float]) -> float:
    """The most common value; on a tie, the smallest of the most common."""
    counts = Counter(_data(values, "mode"))
    top = max(counts.values())
    return min(value for value, count in counts.items() if count == top)


def variance(values: Iterable[float], *, sample: bool = True) -> float:
    """The sample variance (n - 1 in the denominator), or the population variance."""
    data = _data(values, "variance")
    if sample and len(data) < 2:
        raise ValueError("sample variance needs at least two values")
    centre = mean(data)
    squares = math.fsum((x - centre) ** 2 for x in data)
    return squares / (len(data) - 1 if sample else len(data))


def stdev(values: Iterable[float], *, sample: bool = True) -> float:
    """The standard deviation: the square root of the variance."""
    return math.sqrt(variance(values, sample=sample))
