"""Percentiles and the result table."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any


def percentile(samples: list[float], q: float) -> float:
    """Nearest-rank percentile (`q` in 0..100) of unsorted samples; NaN when empty."""
    if not samples:
        return math.nan
    ordered = sorted(samples)
    rank = max(1, math.ceil(q / 100 * len(ordered)))
    return ordered[rank - 1]


def summary(samples: list[float]) -> dict[str, float]:
    """n, p50, p95, p99 and max of samples (milliseconds, by convention)."""
    return {
        "n": len(samples),
        "p50": percentile(samples, 50),
        "p95": percentile(samples, 95),
        "p99": percentile(samples, 99),
        "max": max(samples) if samples else math.nan,
    }


@dataclass
class Row:
    """One line of the table: a figure, its same-run baseline, its target."""

    part: str
    measure: str
    orsbox: str
    baseline: str = ""
    target: str = ""
    met: bool | None = None

    def cells(self) -> list[str]:
        met = {True: "yes", False: "NO", None: ""}[self.met]
        return [self.part, self.measure, self.orsbox, self.baseline, self.target, met]


HEADER = ["part", "measure", "orsbox", "same-run baseline", "target", "met"]


def table(rows: list[Row]) -> str:
    """A markdown table (readable as plain text too)."""
    lines = [HEADER, *(row.cells() for row in rows)]
    widths = [max(len(line[i]) for line in lines) for i in range(len(HEADER))]
    fmt = "| " + " | ".join(f"{{:{w}}}" for w in widths) + " |"
    out = [fmt.format(*HEADER), "|" + "|".join("-" * (w + 2) for w in widths) + "|"]
    out += [fmt.format(*line) for line in lines[1:]]
    return "\n".join(out)


def as_json(rows: list[Row]) -> list[dict[str, Any]]:
    return [asdict(row) for row in rows]


def ms(value: float) -> str:
    return f"{value:.2f} ms" if value < 100 else f"{value:.0f} ms"
