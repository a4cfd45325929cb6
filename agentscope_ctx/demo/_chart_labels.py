"""`Labels`: the texts of the demo's chart, each placed where it overlaps none (estimated
from its text), or left out."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from html import escape

__all__ = ["FONT", "HEIGHT", "WIDTH", "Labels", "text_width"]

WIDTH, HEIGHT = 760, 360
"""The chart's size (the key under the plot makes it taller)."""
FONT = 12


def text_width(text: str, size: float = FONT, *, bold: bool = False) -> float:
    """A generous estimate of a sans-serif text's width in pixels."""
    return len(text) * size * (0.68 if bold else 0.62)


@dataclass(frozen=True)
class Box:
    x0: float
    y0: float
    x1: float
    y1: float

    def meets(self, other: Box, pad: float = 2.0) -> bool:
        return not (
            self.x1 + pad <= other.x0
            or other.x1 + pad <= self.x0
            or self.y1 + pad <= other.y0
            or other.y1 + pad <= self.y0
        )


class Labels:
    """The texts placed so far; a new one goes where it overlaps none."""

    def __init__(self, height: int = HEIGHT) -> None:
        self.height = height
        self.boxes: list[Box] = []
        self.parts: list[str] = []

    @staticmethod
    def box(x: float, y: float, text: str, anchor: str, size: float, bold: bool) -> Box:
        w = text_width(text, size, bold=bold)
        x0 = {"start": x, "middle": x - w / 2, "end": x - w}[anchor]
        return Box(x0, y - size * 0.85, x0 + w, y + size * 0.25)

    def place(
        self,
        text: str,
        spots: Sequence[tuple[float, float, str]],
        *,
        fill: str = "#555",
        size: float = FONT,
        bold: bool = False,
        css: str = "",
    ) -> bool:
        """Put `text` at the first free spot (x, y, anchor); False when none is free."""
        for x, y, anchor in spots:
            box = self.box(x, y, text, anchor, size, bold)
            inside = box.x0 >= 0 and box.y0 >= 0 and box.x1 <= WIDTH and box.y1 <= self.height
            if inside and not any(box.meets(other) for other in self.boxes):
                self.boxes.append(box)
                weight = ' font-weight="bold"' if bold else ""
                klass = f' class="{css}"' if css else ""
                self.parts.append(
                    f'<text x="{x:.1f}" y="{y:.1f}" text-anchor="{anchor}" font-size="{size:g}"'
                    f'{weight} fill="{fill}"{klass}>{escape(text)}</text>'
                )
                return True
        return False
