"""What the demo's chart adds to each prompt: its pressure before relief (the prompt sent plus
what the rungs before it freed), and a key that names every rung with what it saved and every
output cut at its entry with its original size."""

from __future__ import annotations

from ..viewer._page import size_text
from ._report import DemoReport, Rung, RungKind

__all__ = ["before_relief", "freed", "key_lines"]

_RELIEF = frozenset(
    {
        RungKind.SECOND_TRUNCATION,
        RungKind.MASKING,
        RungKind.COMPACTION,
        RungKind.EXTRACTIVE_COMPACTION,
    }
)


def freed(rung: Rung) -> int | None:
    """Tokens a ladder rung or compaction freed (`None`: not one, or not known)."""
    if rung.kind not in _RELIEF or rung.tokens_before is None or rung.tokens_after is None:
        return None
    return rung.tokens_before - rung.tokens_after


def before_relief(report: DemoReport) -> list[int]:
    """Each prompt as it would have been without the rungs that ran just before it: the prompt
    sent plus what they freed (so a prompt the ladder brought under the trigger shows above
    it, where the ladder found it)."""
    values = list(report.prompt_tokens)
    for rung in report.rungs:
        tokens = freed(rung)
        if rung.after and tokens and 1 <= rung.step + 1 <= len(values):
            values[rung.step] += max(tokens, 0)
    return values


def _rung_text(rung: Rung) -> str:
    tokens = freed(rung)
    if tokens is not None:
        return f"{rung.kind}: -{tokens:,} tokens ({rung.tokens_before:,} -> {rung.tokens_after:,})"
    if rung.kind == RungKind.CONTINUATION_READ:
        return f"read on: {rung.file} from line {rung.line}"
    if rung.kind == RungKind.FIRST_TRUNCATION:
        return f"{rung.kind}: {rung.file}"
    return f"{rung.kind}: {rung.detail}"


def key_lines(report: DemoReport, width: int = 118) -> list[str]:
    """One line per rung (what it saved) and per output cut at its entry (original size ->
    excerpt shown), in step order, each at most `width` characters."""
    rows: list[tuple[float, str]] = []
    for rung in report.rungs:
        if rung.kind == RungKind.FIRST_TRUNCATION and report.first_cuts:
            continue  # each cut is listed below, with its size
        rows.append((rung.at, f"{rung.when()}: {_rung_text(rung)}"))
    for step, tool, whole, shown in report.first_cuts:
        size = size_text(whole) if whole is not None else "an output"
        what = f"{tool} output" if tool else "output"
        rows.append(
            (
                step - 0.5,
                f"after step {step - 1}: {what} of {size} saved whole, {size_text(shown)} shown",
            )
        )
    rows.sort(key=lambda row: row[0])
    return [text if len(text) <= width else text[: width - 1] + "…" for _, text in rows]
