"""Small server-side SVG plots (no JavaScript charting library, no CDN)."""

from __future__ import annotations

from html import escape

import numpy as np
import numpy.typing as npt


def histogram_svg(
    values: npt.ArrayLike, bins: int = 20, width: int = 420, height: int = 160, label: str = "delta"
) -> str:
    """A histogram of ``values`` as an inline SVG string, with its axis range and counts as tooltips."""
    array = np.asarray(values, dtype=np.float64)
    array = array[~np.isnan(array)]
    if array.size == 0:
        return ""
    low, high = float(array.min()), float(array.max())
    if high == low:
        low, high = low - 0.5, high + 0.5
    counts, edges = np.histogram(array, bins=bins, range=(low, high))
    pad_left, pad_bottom, pad_top = 34, 22, 8
    plot_w, plot_h = width - pad_left - 8, height - pad_bottom - pad_top
    top = max(int(counts.max()), 1)
    bar_w = plot_w / bins
    parts = [
        f'<svg class="histogram" viewBox="0 0 {width} {height}" width="{width}" height="{height}" '
        f'role="img" aria-label="{escape(label)} histogram">'
    ]
    for i, count in enumerate(counts):
        h = plot_h * count / top
        x = pad_left + i * bar_w
        tip = f"{escape(label)} {edges[i]:.2f} to {edges[i + 1]:.2f}: {count} item{'s' if count != 1 else ''}"
        parts.append(
            f'<rect x="{x:.1f}" y="{pad_top + plot_h - h:.1f}" width="{bar_w - 1:.1f}" height="{h:.1f}">'
            f"<title>{tip}</title></rect>"
        )
    axis_y = pad_top + plot_h
    parts.append(f'<line x1="{pad_left}" y1="{axis_y}" x2="{pad_left + plot_w}" y2="{axis_y}" class="axis"/>')
    parts.append(f'<text x="{pad_left}" y="{height - 6}">{low:.2f}</text>')
    parts.append(f'<text x="{pad_left + plot_w}" y="{height - 6}" text-anchor="end">{high:.2f}</text>')
    parts.append(f'<text x="{pad_left + plot_w / 2}" y="{height - 6}" text-anchor="middle">{escape(label)}</text>')
    parts.append(f'<text x="{pad_left - 4}" y="{pad_top + 10}" text-anchor="end">{top}</text>')
    parts.append(f'<text x="{pad_left - 4}" y="{axis_y}" text-anchor="end">0</text>')
    parts.append("</svg>")
    return "".join(parts)
