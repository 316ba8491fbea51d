"""Plots of a run's recorded metrics, written as an SVG image (no plotting library needed)."""

from __future__ import annotations

import math
from html import escape
from pathlib import Path

from burnish.record.atomic import atomic_write
from burnish.train.metric_log import read_metric_log

#: One colour per split, in the order splits are drawn.
COLOURS = {"train": "#1f77b4", "valid": "#ff7f0e"}
WIDTH, HEIGHT = 640, 220
LEFT, RIGHT, TOP, BOTTOM = 64, 16, 28, 32


def plot_metrics(run_dir: str | Path, path: str | Path | None = None,
                 metrics: list[str] | None = None) -> Path:
    """Draw each metric logged under ``run_dir`` (all of them, or those named) as a panel of
    curves, one per split, against the epoch; write the SVG to ``path`` (default
    ``run_dir/metrics.svg``) atomically and return where it went.

    Raises FileNotFoundError naming the folder when the run has no metric logs, and when a
    named metric has none.
    """
    run_dir = Path(run_dir)
    logs = run_dir / "logs"
    logged = sorted({csv.stem for csv in logs.glob("*/*.csv")})
    if not logged:
        raise FileNotFoundError(f"no metric logs under {logs}: train with a Learner first")
    names = logged if metrics is None else list(metrics)
    for name in names:
        if name not in logged:
            raise FileNotFoundError(f"no log of metric {name!r} under {logs}; logged: "
                                    f"{', '.join(logged)}")
    panels = []
    for index, name in enumerate(names):
        curves = {split: _curve(read_metric_log(run_dir, split, name)) for split in COLOURS
                  if (logs / split / f"{name}.csv").exists()}
        panels.append(_panel(name, curves, index * HEIGHT))
    target = run_dir / "metrics.svg" if path is None else Path(path)
    svg = (f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" '
           f'height="{HEIGHT * len(panels)}" font-family="sans-serif" font-size="11">\n'
           f'<rect width="100%" height="100%" fill="white"/>\n' + "".join(panels) + "</svg>\n")
    target.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(target, svg.encode())
    return target


def _curve(rows: list[tuple[int, int, float]]) -> list[tuple[float, float]]:
    """``(x, value)`` points with x in epochs: step ``i`` of ``n`` in epoch ``e`` is at
    ``e - 1 + i / n``."""
    steps: dict[int, int] = {}
    for epoch, iteration, _ in rows:
        steps[epoch] = max(steps.get(epoch, 0), iteration)
    return [(epoch - 1 + iteration / max(steps[epoch], 1), value)
            for epoch, iteration, value in rows if math.isfinite(value)]


def _panel(name: str, curves: dict[str, list[tuple[float, float]]], top: int) -> str:
    points = [p for curve in curves.values() for p in curve]
    x_max = max((x for x, _ in points), default=1.0) or 1.0
    low = min((v for _, v in points), default=0.0)
    high = max((v for _, v in points), default=1.0)
    if high == low:
        low, high = low - 0.5, high + 0.5
    inner_w, inner_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM

    def at(x: float, v: float) -> str:
        return (f"{LEFT + x / x_max * inner_w:.1f},"
                f"{top + TOP + (high - v) / (high - low) * inner_h:.1f}")

    parts = [
        f'<text x="{LEFT}" y="{top + 18}" font-size="13" font-weight="bold">{escape(name)}</text>',
        f'<rect x="{LEFT}" y="{top + TOP}" width="{inner_w}" height="{inner_h}" fill="none" '
        'stroke="#999"/>',
        f'<text x="{LEFT - 6}" y="{top + TOP + 4}" text-anchor="end">{high:.4g}</text>',
        f'<text x="{LEFT - 6}" y="{top + TOP + inner_h}" text-anchor="end">{low:.4g}</text>',
    ]
    for epoch in range(int(math.ceil(x_max)) + 1):
        x = LEFT + min(epoch / x_max, 1.0) * inner_w
        parts.append(f'<text x="{x:.1f}" y="{top + HEIGHT - 14}" text-anchor="middle">'
                     f'{epoch}</text>')
    parts.append(f'<text x="{LEFT + inner_w / 2}" y="{top + HEIGHT - 2}" '
                 'text-anchor="middle">epoch</text>')
    for i, (split, curve) in enumerate(curves.items()):
        colour = COLOURS[split]
        if curve:
            line = " ".join(at(x, v) for x, v in curve)
            parts.append(f'<polyline class="{split}" points="{line}" fill="none" '
                         f'stroke="{colour}" stroke-width="1.5"/>')
        parts.append(f'<text x="{WIDTH - RIGHT - 60 * (len(curves) - i)}" y="{top + 18}" '
                     f'fill="{colour}">{split}</text>')
    return f'<g class="metric" id="{escape(name)}">\n' + "\n".join(parts) + "\n</g>\n"
