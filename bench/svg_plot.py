"""A small SVG line-chart writer for the benchmarks' curves: panels side by side, each
with its own y axis (one unit per panel), a shared x quantity, a legend per panel.
Written by hand so the docs' plots come from the bench with no plotting dependency."""

from __future__ import annotations

import math
from dataclasses import dataclass
from html import escape

COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b"]
PANEL_W, PANEL_H = 420, 300
MARGIN_L, MARGIN_R, MARGIN_T, MARGIN_B = 62, 16, 34, 92
COLUMNS = 2


@dataclass
class Series:
    label: str
    points: list[tuple[float, float]]


@dataclass
class Panel:
    title: str
    series: list[Series]


def nice_ticks(low: float, high: float, count: int = 5) -> list[float]:
    """Round tick values covering [low, high] (1, 2 or 5 times a power of ten apart)."""
    if not (math.isfinite(low) and math.isfinite(high)) or high <= low:
        high = low + 1
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.floor(low / step) * step
    ticks, value = [], first
    while value <= high + step * 1e-9:
        ticks.append(round(value, 10))
        value += step
    if ticks[-1] < high:
        ticks.append(round(value, 10))
    return ticks


def _label(value: float) -> str:
    return f"{value:,.0f}" if abs(value) >= 10 or value == int(value) else f"{value:.2g}"


def _panel(panel: Panel, x0: float, y0: float, x_label: str) -> list[str]:
    finite = [(x, y) for s in panel.series for x, y in s.points if math.isfinite(y)]
    xs = [x for x, _ in finite] or [0.0, 1.0]
    ys = [y for _, y in finite] or [0.0, 1.0]
    x_ticks = nice_ticks(0.0, max(xs))
    y_ticks = nice_ticks(min(0.0, min(ys)), max(ys))
    left, top = x0 + MARGIN_L, y0 + MARGIN_T
    width = PANEL_W - MARGIN_L - MARGIN_R
    height = PANEL_H - MARGIN_T - MARGIN_B

    def px(x: float) -> float:
        return left + (x - x_ticks[0]) / (x_ticks[-1] - x_ticks[0]) * width

    def py(y: float) -> float:
        return top + height - (y - y_ticks[0]) / (y_ticks[-1] - y_ticks[0]) * height

    out = [
        f'<text x="{left + width / 2:.1f}" y="{y0 + 20}" text-anchor="middle" '
        f'font-weight="bold">{escape(panel.title)}</text>',
        f'<rect x="{left}" y="{top}" width="{width}" height="{height}" fill="none" stroke="#999"/>',
    ]
    for t in y_ticks:
        out.append(
            f'<line x1="{left}" x2="{left + width}" y1="{py(t):.1f}" y2="{py(t):.1f}" '
            'stroke="#eee"/>'
        )
        out.append(f'<text x="{left - 6}" y="{py(t) + 4:.1f}" text-anchor="end">{_label(t)}</text>')
    for t in x_ticks:
        out.append(
            f'<text x="{px(t):.1f}" y="{top + height + 16}" text-anchor="middle">{_label(t)}</text>'
        )
    out.append(
        f'<text x="{left + width / 2:.1f}" y="{top + height + 32}" text-anchor="middle">'
        f"{escape(x_label)}</text>"
    )
    for i, series in enumerate(panel.series):
        colour = COLOURS[i % len(COLOURS)]
        points = [(px(x), py(y)) for x, y in series.points if math.isfinite(y)]
        if points:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in points)
            out.append(
                f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"/>'
            )
            out += [f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>' for x, y in points]
        legend_y = top + height + 50 + 14 * i
        out.append(
            f'<line x1="{left}" x2="{left + 18}" y1="{legend_y - 4}" y2="{legend_y - 4}" '
            f'stroke="{colour}" stroke-width="2"/>'
        )
        out.append(f'<text x="{left + 24}" y="{legend_y}">{escape(series.label)}</text>')
    return out


def write_svg(title: str, x_label: str, panels: list[Panel]) -> str:
    """The SVG document: `panels` in rows of `COLUMNS` under `title`."""
    rows = math.ceil(len(panels) / COLUMNS)
    width, height = COLUMNS * PANEL_W, rows * PANEL_H + 30
    body = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{width / 2}" y="20" text-anchor="middle" font-size="14" '
        f'font-weight="bold">{escape(title)}</text>',
    ]
    for i, panel in enumerate(panels):
        x0, y0 = (i % COLUMNS) * PANEL_W, 30 + (i // COLUMNS) * PANEL_H
        body += _panel(panel, x0, y0, x_label)
    body.append("</svg>")
    return "\n".join(body) + "\n"
