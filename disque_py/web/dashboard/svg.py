"""Charts as inline SVG, drawn in Python from the sampler's series.

A sparkline is a bare polyline for a table cell; a chart adds its title,
the highest value and a time axis. Both take a list of numbers, oldest
first, and scale them to their own maximum (0 at the bottom). Long series
are first averaged down to at most one point per MAX_POINTS_PER_PX pixels,
so a page of a hundred sparklines stays small. The only text that enters
the markup besides numbers is a chart's title, escaped.
"""

from __future__ import annotations

from markupsafe import Markup, escape

SPARK_WIDTH, SPARK_HEIGHT = 120, 22
CHART_WIDTH, CHART_HEIGHT = 520, 100
CHART_MARGIN_TOP, CHART_MARGIN_BOTTOM = 16, 16
SPARK_POINTS, CHART_POINTS = 30, 260
LINE_COLOUR = "#2a6fdb"
FILL_COLOUR = "#2a6fdb22"


def sparkline(values: list[float], title: str = "") -> Markup:
    """A small line for a table cell; its tooltip gives the latest and highest value."""
    points = downsample(values, SPARK_POINTS)
    latest = points[-1] if points else 0
    tooltip = f"{title}: now {human(latest)}, max {human(max(points, default=0))}"
    body = _line(points, SPARK_WIDTH, 1, SPARK_HEIGHT - 1, fill=False)
    return Markup(
        f'<svg class="spark" width="{SPARK_WIDTH}" height="{SPARK_HEIGHT}" '
        f'viewBox="0 0 {SPARK_WIDTH} {SPARK_HEIGHT}" role="img" '
        f'aria-label="{escape(tooltip)}"><title>{escape(tooltip)}</title>{body}</svg>')


def chart(values: list[float], title: str, span_seconds: float, unit: str = "") -> Markup:
    """A titled chart: the series, its maximum and how far back it goes."""
    points = downsample(values, CHART_POINTS)
    top = max(points, default=0)
    latest = points[-1] if points else 0
    body = _line(points, CHART_WIDTH, CHART_MARGIN_TOP, CHART_HEIGHT - CHART_MARGIN_BOTTOM)
    baseline = CHART_HEIGHT - CHART_MARGIN_BOTTOM
    label = escape(f"{title}: now {human(latest)}{unit}, max {human(top)}{unit}")
    return Markup(
        f'<svg class="chart" width="{CHART_WIDTH}" height="{CHART_HEIGHT}" '
        f'viewBox="0 0 {CHART_WIDTH} {CHART_HEIGHT}" role="img" aria-label="{label}">'
        f'<title>{label}</title>'
        f'<text x="2" y="11" class="chart-title">{escape(title)}</text>'
        f'<text x="{CHART_WIDTH - 2}" y="11" text-anchor="end">now {human(latest)}{escape(unit)}'
        f' · max {human(top)}{escape(unit)}</text>'
        f'<line x1="0" y1="{baseline}" x2="{CHART_WIDTH}" y2="{baseline}" stroke="#bbb"/>'
        f'{body}'
        f'<text x="2" y="{CHART_HEIGHT - 3}">-{_duration(span_seconds)}</text>'
        f'<text x="{CHART_WIDTH - 2}" y="{CHART_HEIGHT - 3}" text-anchor="end">now</text>'
        f'</svg>')


def downsample(values: list[float], max_points: int) -> list[float]:
    """At most max_points means of consecutive runs of values, in order."""
    count = len(values)
    if count <= max_points:
        return list(values)
    out = []
    for i in range(max_points):
        start, stop = i * count // max_points, (i + 1) * count // max_points
        chunk = values[start:stop]
        out.append(sum(chunk) / len(chunk))
    return out


def _line(points: list[float], width: int, top: float, bottom: float,
          fill: bool = True) -> str:
    """A polyline (and the area under it), scaled between y=top and y=bottom."""
    if len(points) < 2:
        return f'<line x1="0" y1="{bottom}" x2="{width}" y2="{bottom}" stroke="#ddd"/>'
    highest = max(points) or 1
    step = width / (len(points) - 1)
    coords = " ".join(f"{i * step:.1f},{bottom - (bottom - top) * value / highest:.1f}"
                      for i, value in enumerate(points))
    area = f'<polygon points="0,{bottom} {coords} {width},{bottom}" fill="{FILL_COLOUR}"/>'
    return (area if fill else "") + \
        f'<polyline points="{coords}" fill="none" stroke="{LINE_COLOUR}" stroke-width="1.5"/>'



def human(value: float) -> str:
    """1234567 -> 1.2M, 0.25 -> 0.25, 12.0 -> 12."""
    value = float(value)
    for limit, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if abs(value) >= limit:
            return f"{value / limit:.1f}{suffix}"
    if value == int(value):
        return str(int(value))
    return f"{value:.2f}"


def _duration(seconds: float) -> str:
    seconds = int(seconds)
    if seconds >= 60:
        return f"{seconds // 60}m{seconds % 60:02d}s"
    return f"{seconds}s"
