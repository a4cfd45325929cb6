"""`render_chart`: a demo's prompt sizes as a hand-written SVG line chart.

Our count of every prompt sent and its pressure before relief (the prompt plus what the rungs
before it freed: a prompt the ladder brought back under the trigger shows above it, where it
was), the provider's count where it reported one, the prompts it
rejected, the budget and compaction-trigger lines, and a marker at each rung of the run (a
line between two steps for the context manager's: first truncation, second truncation,
masking, compaction; a ring on the step for the model's: a continuation read, a
`search_history` hit), each with a tooltip saying what it did. Axis
ticks are round numbers (1, 2, 2.5 or 5 times a power of ten), and no two labels overlap:
each label takes the first free spot among a few candidates, estimated from its text, or
is left out (every marker keeps a tooltip). Below the plot, a key names every rung with what
it saved and every output cut at its entry with its original size (`_chart_key`).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from html import escape

from ._chart_key import before_relief, freed, key_lines
from ._chart_labels import FONT, HEIGHT, WIDTH, Labels, text_width
from ._report import DemoReport, Rung, RungKind

__all__ = ["nice_step", "render_chart"]

_RIGHT, _TOP, _BOTTOM = 20, 58, 50
_OURS, _PROVIDER, _REJECTED = "#2471a3", "#16a085", "#c0392b"
_BEFORE = "#e67e22"
_KEY_ROW = 15


def nice_step(span: float, target: int = 5) -> int:
    """A round step (1, 2, 2.5 or 5 times a power of ten, at least 1) that cuts `span` into
    about `target` parts."""
    raw = max(span / max(target, 1), 1.0)
    magnitude = 10 ** math.floor(math.log10(raw))
    for mantissa in (1, 2, 2.5, 5, 10):
        step = mantissa * magnitude
        if step >= raw and float(step).is_integer():
            return int(step)
    return int(10 * magnitude)


def render_chart(report: DemoReport) -> str:
    """The SVG of a demo run (see the module docstring)."""
    values = report.prompt_tokens or [0]
    before = before_relief(report) or [0]
    provider = [(i + 1, v) for i, v in enumerate(report.provider_tokens) if v is not None]
    n = len(values)
    highest = max([*values, *before, report.budget, *(v for _, v in provider)])
    key = key_lines(report, width=int((WIDTH - 80) / (11 * 0.62)))
    height = HEIGHT + (len(key) * _KEY_ROW + 14 if key else 0)
    y_step = nice_step(highest * 1.05)
    y_ticks = list(range(0, math.ceil(highest * 1.05 / y_step) * y_step + 1, y_step))
    y_max = y_ticks[-1]
    left = max(70.0, max(text_width(f"{v:,}") for v in y_ticks) + 14)
    plot_w, plot_h = WIDTH - left - _RIGHT, HEIGHT - _TOP - _BOTTOM

    def x(i: float) -> float:
        return left + (plot_w * (i - 1) / (n - 1) if n > 1 else plot_w / 2)

    def y(v: float) -> float:
        return _TOP + plot_h - plot_h * v / y_max

    labels = Labels(height)
    labels.place(
        f"agentscope-ctx demo {report.name}: prompt tokens per model call",
        [(left, 22, "start")],
        fill="#000",
        size=15,
        bold=True,
    )
    legend = [("our count of each prompt sent", _OURS)]
    if before != values:
        legend.append(("before relief", _BEFORE))
    if provider:
        legend.append(("provider's count (usage)", _PROVIDER))
    if report.rejected:
        legend.append(("× rejected by the provider", _REJECTED))
    at = left
    for text, colour in legend:
        labels.place(text, [(at, 44, "start")], fill=colour)
        at += text_width(text) + 18
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{WIDTH}" height="{height}" '
        f'viewBox="0 0 {WIDTH} {height}" font-family="sans-serif" font-size="{FONT}">',
        f'<rect width="{WIDTH}" height="{height}" fill="white"/>',
        f'<line x1="{left}" y1="{_TOP + plot_h}" x2="{left + plot_w}" y2="{_TOP + plot_h}" '
        'stroke="#333"/>',
        f'<line x1="{left}" y1="{_TOP}" x2="{left}" y2="{_TOP + plot_h}" stroke="#333"/>',
    ]
    for v in y_ticks:
        parts.append(
            f'<line x1="{left - 4}" y1="{y(v):.1f}" x2="{left}" y2="{y(v):.1f}" stroke="#333"/>'
        )
        labels.place(f"{v:,}", [(left - 7, y(v) + 4, "end")], css="ytick")
    spacing = plot_w / (n - 1) if n > 1 else plot_w
    x_step = next(s for s in _steps() if s * spacing >= text_width(str(n)) + 8 or s >= max(n, 1))
    x_ticks = [i for i in range(1, n + 1) if i % x_step == 0 or x_step == 1] or [1]
    for i in x_ticks:
        labels.place(str(i), [(x(i), _TOP + plot_h + 16, "middle")], css="xtick")
    counted = f"; tokens: our count, {report.counter}" if report.counter else ""
    labels.place(
        f"model call (step){counted}", [(left + plot_w / 2, HEIGHT - 10, "middle")], fill="#000"
    )
    for value, colour, text in (
        (report.budget, "#c0392b", f"budget {report.budget:,}"),
        (report.threshold, "#e67e22", f"compaction trigger {report.threshold:,}"),
    ):
        parts.append(
            f'<line x1="{left}" y1="{y(value):.1f}" x2="{left + plot_w}" y2="{y(value):.1f}" '
            f'stroke="{colour}" stroke-dasharray="6,4"/>'
        )
        above, below = y(value) - 5, y(value) + FONT + 3
        right_end, left_end = left + plot_w - 4, left + 6
        labels.place(
            text,
            [
                (right_end, above, "end"),
                (right_end, below, "end"),
                (left_end, above, "start"),
                (left_end, below, "start"),
            ],
            fill=colour,
        )
    parts += _rungs(report, labels, x, y, plot_h)
    parts += _pressure(before, values, x, y)
    parts += _series(values, provider, report.rejected, x, y)
    for row, text in enumerate(key):
        labels.place(text, [(left, HEIGHT + 10 + _KEY_ROW * row, "start")], size=11, css="key")
    parts += labels.parts
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


_RUNG_STYLE = {  # colour, dash, label
    RungKind.FIRST_TRUNCATION: ("#7f8c8d", "2,3", "1st truncation"),
    RungKind.SECOND_TRUNCATION: ("#5d9cec", "5,3", "2nd truncation"),
    RungKind.MASKING: ("#27ae60", "5,3", "masking"),
    RungKind.COMPACTION: ("#8e44ad", "", "model compaction"),
    RungKind.EXTRACTIVE_COMPACTION: ("#8e44ad", "", "extractive compaction"),
    RungKind.CONTINUATION_READ: ("#2c3e50", "", "read on"),
    RungKind.SEARCH_HIT: ("#d35400", "", "search hit"),
    RungKind.SEARCH_MISS: ("#c0392b", "", "search: no hit"),
}
_ORDER = (
    RungKind.COMPACTION,
    RungKind.EXTRACTIVE_COMPACTION,
    RungKind.SEARCH_HIT,
    RungKind.SEARCH_MISS,
    RungKind.MASKING,
    RungKind.SECOND_TRUNCATION,
    RungKind.FIRST_TRUNCATION,
    RungKind.CONTINUATION_READ,
)
"""Labels are placed in this order, each where it fits (the key below lists them all)."""
_HEAVY = frozenset(_ORDER[:2])


def _rungs(
    report: DemoReport,
    labels: Labels,
    x: Callable[[float], float],
    y: Callable[[float], float],
    plot_h: float,
) -> list[str]:
    """A line (rungs of the context manager: between two steps) or a ring (tool calls of
    the model: on the step's point) at each rung, each with a tooltip; labels where they
    fit (see `_ORDER`)."""
    n = len(report.prompt_tokens)
    rungs = list(report.rungs)
    compacted = {
        r.step for r in rungs if r.kind in (RungKind.COMPACTION, RungKind.EXTRACTIVE_COMPACTION)
    }
    for at_step in report.compaction_steps:  # a report made without rungs
        if at_step not in compacted:
            rungs.append(
                Rung(RungKind.COMPACTION, at_step, True, f"compaction after step {at_step}")
            )
    parts: list[str] = []
    spots: list[tuple[Rung, float, float]] = []
    for rung in rungs:
        colour, dash, _ = _RUNG_STYLE.get(rung.kind, ("#555", "", rung.kind))
        emergency = rung.after and rung.step in report.rejected and rung.kind in _HEAVY
        tip = escape(
            f"{'emergency ' if emergency else ''}{rung.kind}, {rung.when()}: {rung.detail}"
        )
        if rung.after:
            cx = x(rung.step + 0.5) if n > 1 else x(1)
            width = "1.5" if rung.kind in _HEAVY else "1"
            dashes = f' stroke-dasharray="{dash}"' if dash else ""
            parts.append(
                f'<line x1="{cx:.1f}" y1="{_TOP}" x2="{cx:.1f}" y2="{_TOP + plot_h}" '
                f'stroke="{colour}" stroke-width="{width}"{dashes}><title>{tip}</title></line>'
            )
            spots.append((rung, cx, _TOP + 12))
        elif 1 <= rung.step <= n:
            cx, cy = x(rung.step), y(report.prompt_tokens[rung.step - 1])
            parts.append(
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="7" fill="none" stroke="{colour}" '
                f'stroke-width="2"><title>{tip}</title></circle>'
            )
            spots.append((rung, cx, cy - 12))
    rank = {kind: k for k, kind in enumerate(_ORDER)}
    for rung, cx, top in sorted(spots, key=lambda s: (rank.get(s[0].kind, 99), s[0].at)):
        colour, _, text = _RUNG_STYLE.get(rung.kind, ("#555", "", rung.kind))
        if rung.after and rung.step in report.rejected and rung.kind in _HEAVY:
            text = "emergency compaction"
        saved = freed(rung)
        if saved:
            text = f"{text} -{saved:,}"
        rows = [top + 14 * r for r in range(6)] if rung.after else [top, top - 14, top + 30]
        labels.place(
            text,
            [(cx + 3, r, "start") for r in rows] + [(cx - 3, r, "end") for r in rows],
            fill=colour,
        )
    return parts


def _pressure(
    before: list[int], values: list[int], x: Callable[[float], float], y: Callable[[float], float]
) -> list[str]:
    """The prompts before relief (where rungs ran), joined to the prompts sent."""
    if before == values:
        return []
    points = " ".join(f"{x(i + 1):.1f},{y(v):.1f}" for i, v in enumerate(before))
    parts = [
        f'<polyline class="before" points="{points}" fill="none" stroke="{_BEFORE}" '
        'stroke-width="1.5" stroke-dasharray="3,3"/>'
    ]
    for i, (high, sent) in enumerate(zip(before, values, strict=True), start=1):
        if high > sent:
            tip = f"step {i}: {high:,} tokens before relief, {sent:,} sent"
            parts.append(
                f'<line x1="{x(i):.1f}" y1="{y(high):.1f}" x2="{x(i):.1f}" y2="{y(sent):.1f}" '
                f'stroke="{_BEFORE}" stroke-width="2"><title>{escape(tip)}</title></line>'
            )
    return parts


def _steps() -> list[int]:
    """1, 2, 5, 10, 20, 50, ... far enough for any demo."""
    return [m * 10**k for k in range(7) for m in (1, 2, 5)]


def _series(
    values: list[int],
    provider: list[tuple[int, int]],
    rejected: dict[int, str],
    x: Callable[[float], float],
    y: Callable[[float], float],
) -> list[str]:
    parts: list[str] = []
    if provider:
        points = " ".join(f"{x(i):.1f},{y(v):.1f}" for i, v in provider)
        parts.append(
            f'<polyline points="{points}" fill="none" stroke="{_PROVIDER}" '
            'stroke-width="1.5" stroke-dasharray="4,3"/>'
        )
        for i, v in provider:
            parts.append(
                f'<rect x="{x(i) - 2.5:.1f}" y="{y(v) - 2.5:.1f}" width="5" height="5" '
                f'fill="{_PROVIDER}"><title>step {i}: provider counted {v:,} tokens</title></rect>'
            )
    points = " ".join(f"{x(i + 1):.1f},{y(v):.1f}" for i, v in enumerate(values))
    parts.append(f'<polyline points="{points}" fill="none" stroke="{_OURS}" stroke-width="2"/>')
    for i, v in enumerate(values, start=1):
        cx, cy = x(i), y(v)
        if i in rejected:
            tip = f"step {i}: {v:,} tokens, rejected: {rejected[i]}"
            parts.append(
                f'<path d="M{cx - 5:.1f},{cy - 5:.1f}L{cx + 5:.1f},{cy + 5:.1f}'
                f'M{cx - 5:.1f},{cy + 5:.1f}L{cx + 5:.1f},{cy - 5:.1f}" stroke="{_REJECTED}" '
                f'stroke-width="2.5"><title>{escape(tip)}</title></path>'
            )
        else:
            parts.append(
                f'<circle cx="{cx:.1f}" cy="{cy:.1f}" r="3" fill="{_OURS}">'
                f"<title>step {i}: {v:,} tokens</title></circle>"
            )
    return parts
