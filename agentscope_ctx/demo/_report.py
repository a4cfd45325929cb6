"""`DemoReport`: what a demo run did, as text and as a hand-written SVG chart."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from html import escape
from pathlib import Path

__all__ = ["DemoReport", "render_chart"]


@dataclass
class DemoReport:
    """The numbers a demo run ends with."""

    name: str
    working_dir: Path
    budget: int
    """`max_input_tokens`."""
    threshold: int
    """Tokens at which compaction triggers."""
    prompt_tokens: list[int] = field(default_factory=list)
    """Tokens of each prompt the model received, in order (one per model call)."""
    compaction_steps: list[int] = field(default_factory=list)
    """For each compaction: how many model calls had happened before it."""
    continuation_reads: int = 0
    first_truncations: int = 0
    second_truncations: int = 0
    bytes_offloaded: int = 0
    """Total size of `tool_result/`."""
    offloaded_files: int = 0
    files_written: int = 0
    dialog_messages: int = 0
    chart: Path | None = None
    answer: str = ""

    @property
    def steps(self) -> int:
        """Model calls."""
        return len(self.prompt_tokens)

    @property
    def peak(self) -> int:
        """The largest prompt, in tokens."""
        return max(self.prompt_tokens, default=0)

    @property
    def compactions(self) -> int:
        return len(self.compaction_steps)

    def render(self) -> str:
        """The report as a few aligned lines."""
        ok = "within" if self.peak <= self.budget else "OVER"
        rows = [
            ("steps (model calls)", f"{self.steps}"),
            (
                "peak prompt",
                f"{self.peak:,} tokens of {self.budget:,} budget "
                f"({self.peak / self.budget:.0%}, {ok} budget)",
            ),
            ("compactions", f"{self.compactions} (after steps {_list(self.compaction_steps)})"),
            ("messages in dialog/", f"{self.dialog_messages}"),
            (
                "truncations seen",
                f"{self.first_truncations} first, {self.second_truncations} second (harder)",
            ),
            ("continuation reads", f"{self.continuation_reads} (read_file following a notice)"),
            (
                "bytes offloaded",
                f"{self.bytes_offloaded:,} bytes in {self.offloaded_files} tool_result/ files",
            ),
            ("files written", f"{self.files_written} under {self.working_dir}"),
            ("chart", str(self.chart) if self.chart else "-"),
        ]
        width = max(len(key) for key, _ in rows)
        lines = [f"=== report: demo {self.name!r} ==="]
        lines += [f"  {key:<{width}}  {value}" for key, value in rows]
        return "\n".join(lines)


def _list(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values) or "-"


def render_chart(report: DemoReport) -> str:
    """An SVG line chart: prompt tokens per step, the budget and trigger lines, and a marker
    at each compaction."""
    width, height = 760, 340
    left, right, top, bottom = 70, 20, 40, 50
    plot_w, plot_h = width - left - right, height - top - bottom
    values = report.prompt_tokens or [0]
    y_max = max(max(values), report.budget) * 1.08
    n = len(values)

    def x(i: float) -> float:
        return left + (plot_w * (i - 1) / (n - 1) if n > 1 else plot_w / 2)

    def y(v: float) -> float:
        return top + plot_h - plot_h * v / y_max

    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="12">',
        f'<rect width="{width}" height="{height}" fill="white"/>',
        f'<text x="{left}" y="22" font-size="15" font-weight="bold">'
        f"agentscope-ctx demo {escape(report.name)!s}: prompt tokens per model call</text>",
        f'<line x1="{left}" y1="{top + plot_h}" x2="{left + plot_w}" y2="{top + plot_h}" '
        'stroke="#333"/>',
        f'<line x1="{left}" y1="{top}" x2="{left}" y2="{top + plot_h}" stroke="#333"/>',
    ]
    for k in range(5):
        v = y_max * k / 4
        parts.append(
            f'<text x="{left - 6}" y="{y(v) + 4:.1f}" text-anchor="end" fill="#555">'
            f"{int(v):,}</text>"
        )
    step_every = max(1, n // 12)
    for i in range(1, n + 1, step_every):
        parts.append(
            f'<text x="{x(i):.1f}" y="{top + plot_h + 16}" text-anchor="middle" '
            f'fill="#555">{i}</text>'
        )
    parts.append(
        f'<text x="{left + plot_w / 2}" y="{height - 10}" text-anchor="middle">'
        "model call (step)</text>"
    )
    for value, colour, label in (
        (report.budget, "#c0392b", f"budget {report.budget:,}"),
        (report.threshold, "#e67e22", f"compaction trigger {report.threshold:,}"),
    ):
        parts.append(
            f'<line x1="{left}" y1="{y(value):.1f}" x2="{left + plot_w}" y2="{y(value):.1f}" '
            f'stroke="{colour}" stroke-dasharray="6,4"/>'
        )
        parts.append(
            f'<text x="{left + plot_w - 4}" y="{y(value) - 5:.1f}" text-anchor="end" '
            f'fill="{colour}">{label}</text>'
        )
    for at in report.compaction_steps:
        cx = x(at + 0.5) if n > 1 else x(1)
        parts.append(
            f'<line x1="{cx:.1f}" y1="{top}" x2="{cx:.1f}" y2="{top + plot_h}" '
            'stroke="#8e44ad" stroke-width="1.5"/>'
        )
        parts.append(f'<text x="{cx + 3:.1f}" y="{top + 12}" fill="#8e44ad">compaction</text>')
    points = " ".join(f"{x(i + 1):.1f},{y(v):.1f}" for i, v in enumerate(values))
    parts.append(f'<polyline points="{points}" fill="none" stroke="#2471a3" stroke-width="2"/>')
    for i, v in enumerate(values):
        parts.append(
            f'<circle cx="{x(i + 1):.1f}" cy="{y(v):.1f}" r="3" fill="#2471a3">'
            f"<title>step {i + 1}: {v:,} tokens</title></circle>"
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"
