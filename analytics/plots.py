"""Server-side SVG plots for the report (no JavaScript charting library, no CDN). Every plot's
numbers are also on the page as a table and as CSV."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping, Sequence
from html import escape
from typing import Protocol

PALETTE = ["#2457c5", "#d9480f", "#2b8a3e", "#862e9c", "#e67700", "#0b7285", "#5c940d", "#a61e4d"]


def fmt(v: float) -> str:
    """An axis label a person reads: never scientific notation; thousands grouped (1,100), otherwise three
    significant digits without trailing zeros (0.123, 2.5, 40)."""
    v = float(v)
    if abs(v) >= 1000:
        return f"{v:,.0f}"
    if v == 0:
        return "0"
    digits = max(0, 2 - math.floor(math.log10(abs(v))))
    text = f"{v:.{digits}f}"
    return text.rstrip("0").rstrip(".") if "." in text else text


class Interval(Protocol):
    """A row of an interval plot: a leaderboard's row (``analytics.leaderboards.BoardRow``) or a ``Span``."""

    @property
    def system(self) -> str: ...
    @property
    def rating(self) -> float: ...
    @property
    def low(self) -> float | None: ...
    @property
    def high(self) -> float | None: ...


@dataclasses.dataclass(frozen=True)
class Span:
    """A point estimate with its 95 % interval, labelled ``system``."""

    system: str
    rating: float
    low: float | None
    high: float | None


def interval_plot(
    rows: Sequence[Interval],
    width: int = 520,
    row_height: int = 22,
    label: str = "rating",
    decimals: int = 1,
    reference: tuple[float, str] | None = None,
) -> str:
    """Horizontal point estimates with 95 % interval whiskers, one row per system (rows: system, rating,
    low, high); ``decimals`` for the values in each point's tooltip; ``reference``: (value, words) drawn as a
    dashed line (e.g. 0.5, "even") and always inside the axis."""
    # an interval is drawn where it exists (None or NaN ends: none, e.g. a sandwich over fewer than two items)
    shown = [
        (r, r.low, r.high)
        for r in rows
        if r.low is not None and r.high is not None and r.low == r.low and r.high == r.high
    ]
    if not shown:
        return ""
    lo = min(min(low, r.rating) for r, low, _ in shown)
    hi = max(max(high, r.rating) for r, _, high in shown)
    if reference is not None:
        lo, hi = min(lo, reference[0]), max(hi, reference[0])
    pad = (hi - lo) * 0.05 or 1.0
    lo, hi = lo - pad, hi + pad
    # room for the longest row label (about 6 px a character at 11 px), at most half the plot
    left = int(min(max(170, 6 * max(len(str(r.system)) for r, _, _ in shown) + 16), width // 2))
    right, top = 20, (22 if reference is not None else 8)
    height = top + row_height * len(shown) + 26
    plot_w = width - left - right

    def x(v: float) -> float:
        return left + plot_w * (v - lo) / (hi - lo)

    parts = [
        f'<svg class="plot" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(label)} with 95% intervals">'
    ]
    for i, (r, low, high) in enumerate(shown):
        y = top + row_height * i + row_height / 2
        parts.append(f'<text x="{left - 8}" y="{y + 4}" text-anchor="end">{escape(str(r.system))}</text>')
        parts.append(f'<line x1="{x(low):.1f}" y1="{y}" x2="{x(high):.1f}" y2="{y}" class="whisker"/>')
        parts.append(
            f'<circle cx="{x(r.rating):.1f}" cy="{y}" r="4" fill="{PALETTE[0]}">'
            f"<title>{escape(str(r.system))}: {r.rating:.{decimals}f} "
            f"[{low:.{decimals}f}, {high:.{decimals}f}]</title>"
            "</circle>"
        )
    base = top + row_height * len(shown) + 4
    if reference is not None:
        parts.append(
            f'<line x1="{x(reference[0]):.1f}" y1="{top}" x2="{x(reference[0]):.1f}" y2="{base}" class="reference"/>'
        )
        parts.append(f'<text x="{x(reference[0]):.1f}" y="14" text-anchor="middle">{escape(reference[1])}</text>')
    parts.append(f'<line x1="{left}" y1="{base}" x2="{width - right}" y2="{base}" class="axis"/>')
    parts.append(f'<text x="{left}" y="{base + 16}">{fmt(lo)}</text>')
    parts.append(f'<text x="{width - right}" y="{base + 16}" text-anchor="end">{fmt(hi)}</text>')
    parts.append(f'<text x="{left + plot_w / 2}" y="{base + 16}" text-anchor="middle">{escape(label)}</text>')
    parts.append("</svg>")
    return "".join(parts)


def line_plot(
    series: Mapping[str, Sequence[tuple[float, float | None]]],
    xlabel: str,
    ylabel: str,
    y_range: tuple[float, float] | None = None,
    width: int = 460,
    height: int = 220,
    errors: Mapping[str, Sequence[float | None]] | None = None,
) -> str:
    """Lines (with optional symmetric error bars) for several named series of (x, y) points."""
    points = [(x, y) for s in series.values() for x, y in s if y is not None]
    if not points:
        return ""
    xs = [p[0] for p in points]
    x_lo, x_hi = min(xs), max(xs)
    if x_hi == x_lo:
        x_lo, x_hi = x_lo - 1, x_hi + 1
    if y_range is None:
        ys = [p[1] for p in points]
        for name, errs in (errors or {}).items():
            for (_x, y), e in zip(series[name], errs, strict=True):
                if y is not None and e is not None:
                    ys += [y - e, y + e]
        y_lo, y_hi = min(ys), max(ys)
        if y_hi == y_lo:
            y_lo, y_hi = y_lo - 0.5, y_hi + 0.5
    else:
        y_lo, y_hi = y_range
    left, right, top, bottom = 46, 12, 10, 40
    pw, ph = width - left - right, height - top - bottom

    def px(v: float) -> float:
        return left + pw * (v - x_lo) / (x_hi - x_lo)

    def py(v: float) -> float:
        return top + ph * (1 - (v - y_lo) / (y_hi - y_lo))

    parts = [
        f'<svg class="plot" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(ylabel)} against {escape(xlabel)}">'
    ]
    parts.append(f'<line x1="{left}" y1="{top + ph}" x2="{left + pw}" y2="{top + ph}" class="axis"/>')
    parts.append(f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + ph}" class="axis"/>')
    for v in (y_lo, (y_lo + y_hi) / 2, y_hi):
        parts.append(f'<text x="{left - 4}" y="{py(v) + 4:.1f}" text-anchor="end">{fmt(v)}</text>')
    parts.append(f'<text x="{left}" y="{height - 22}">{fmt(x_lo)}</text>')
    parts.append(f'<text x="{left + pw}" y="{height - 22}" text-anchor="end">{fmt(x_hi)}</text>')
    parts.append(f'<text x="{left + pw / 2}" y="{height - 22}" text-anchor="middle">{escape(xlabel)}</text>')
    legend_x = left
    for n, (name, pts) in enumerate(series.items()):
        color = PALETTE[n % len(PALETTE)]
        drawn = [(x, y) for x, y in pts if y is not None]
        if len(drawn) > 1:
            path = " ".join(f"{'M' if i == 0 else 'L'}{px(x):.1f},{py(y):.1f}" for i, (x, y) in enumerate(drawn))
            parts.append(f'<path d="{path}" fill="none" stroke="{color}" stroke-width="2"/>')
        errs = (errors or {}).get(name) or [None] * len(pts)
        for (x, y), e in zip(pts, errs, strict=True):
            if y is None:
                continue
            if e is not None:
                parts.append(
                    f'<line x1="{px(x):.1f}" y1="{py(y - e):.1f}" x2="{px(x):.1f}" y2="{py(y + e):.1f}" '
                    f'stroke="{color}"/>'
                )
            parts.append(
                f'<circle cx="{px(x):.1f}" cy="{py(y):.1f}" r="3" fill="{color}">'
                f"<title>{escape(name)}: {fmt(x)}, {fmt(y)}</title></circle>"
            )
        parts.append(
            f'<rect x="{legend_x}" y="{height - 12}" width="10" height="10" fill="{color}"/>'
            f'<text x="{legend_x + 14}" y="{height - 3}">{escape(name)}</text>'
        )
        legend_x += 24 + 7 * len(name)
    parts.append("</svg>")
    return "".join(parts)


def _shade(fraction: float) -> str:
    """A blue from light (0) to the accent's dark (1), for ordered values."""
    light, dark = (198, 219, 239), (8, 48, 107)
    return "#" + "".join(f"{round(lo + (hi - lo) * fraction):02x}" for lo, hi in zip(light, dark, strict=True))


def stacked_bars(
    rows: list[tuple[str, dict[float, int]]],
    value_label: str,
    unit: str = "rating set",
    width: int = 460,
    row_height: int = 22,
) -> str:
    """One horizontal bar per row, split into each value's share of the row's count -- e.g. the consistency of
    the rating sets in each separability bin (Fig. 6 of the separability paper). Each segment's tooltip says its
    value and count; the legend orders the values from light to dark."""
    values = sorted({v for _, counts in rows for v in counts})
    rows = [(name, counts) for name, counts in rows if sum(counts.values())]
    if not values or not rows:
        return ""
    left = int(min(max(120, 6 * max(len(name) for name, _ in rows) + 16), width // 2))
    right, top = 12, 8
    plot_w = width - left - right
    base = top + row_height * len(rows)
    height = base + 44
    shade = {v: _shade(i / max(1, len(values) - 1)) for i, v in enumerate(values)}
    parts = [
        f'<svg class="plot" viewBox="0 0 {width} {height}" width="{width}" height="{height}" role="img" '
        f'aria-label="{escape(value_label)}: share of each value per row">'
    ]
    for i, (name, counts) in enumerate(rows):
        y = top + row_height * i
        total = sum(counts.values())
        parts.append(f'<text x="{left - 8}" y="{y + row_height / 2 + 4}" text-anchor="end">{escape(name)}</text>')
        x = float(left)
        for v in values:
            n = counts.get(v, 0)
            if not n:
                continue
            w = plot_w * n / total
            parts.append(
                f'<rect x="{x:.1f}" y="{y + 3}" width="{w:.1f}" height="{row_height - 6}" fill="{shade[v]}">'
                f"<title>{escape(name)}: {fmt(v)}: {n:,} {unit}{'' if n == 1 else 's'} of {total:,}</title>"
                "</rect>"
            )
            x += w
    parts.append(f'<text x="{left}" y="{base + 14}">0 %</text>')
    parts.append(f'<text x="{width - right}" y="{base + 14}" text-anchor="end">100 % of the {unit}s</text>')
    legend_x = left
    parts.append(f'<text x="{left - 8}" y="{height - 4}" text-anchor="end">{escape(value_label)}</text>')
    for v in values:
        parts.append(
            f'<rect x="{legend_x}" y="{height - 14}" width="10" height="10" fill="{shade[v]}"/>'
            f'<text x="{legend_x + 14}" y="{height - 5}">{fmt(v)}</text>'
        )
        legend_x += 24 + 7 * len(fmt(v))
    parts.append("</svg>")
    return "".join(parts)
