"""`collect_rungs`: the rungs of a demo run, from what its model saw (`PromptStats`) and
what the context manager announced (`Notices`), for the report and the chart."""

from __future__ import annotations

from pathlib import Path

from ._notices import Announcement, Notices
from ._report import Rung, RungKind
from ._stats import PromptStats

__all__ = ["collect_rungs", "first_cuts"]


def _relative(path: str | None, root: Path) -> str | None:
    """`path` relative to the working dir where it is inside it."""
    if path is None:
        return None
    try:
        return str(Path(path).resolve().relative_to(root.resolve()))
    except (ValueError, OSError):
        return path


def _saved(file: str | None) -> bool:
    """Whether `file` (relative) is a saved output (else a file the agent read in place)."""
    return file is not None and file.startswith("tool_result/")


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except OSError:
        return None


def _first_truncation(stats: PromptStats, root: Path) -> list[Rung]:
    if not stats.first_cuts:
        return []
    cut = stats.first_cuts[0]
    notice = cut.notice
    path = Path(notice.file_path)
    size = _size(path if path.is_absolute() else root / path)
    whole = f"{size:,} bytes, " if size is not None else ""
    more = len(stats.first_cuts) - 1
    tool = f"{cut.tool}'s output" if cut.tool else "a tool's output"
    file = _relative(notice.file_path, root)
    kept = "saved whole in" if _saved(file) else "the file it read:"
    detail = (
        f"{tool} ({whole}{notice.total_lines:,} lines) entered the context as a "
        f"{notice.n_bytes:,}-byte excerpt + notice; {kept} {file}"
        + (f" (and {more} more outputs cut)" if more > 0 else "")
    )
    return [Rung(RungKind.FIRST_TRUNCATION, cut.step - 1, True, detail, file=file)]


def first_cuts(stats: PromptStats, root: Path) -> list[tuple[int, str, int | None, int]]:
    """Each output cut at its entry: (step, tool, original bytes, bytes shown)."""
    cuts = []
    for cut in stats.first_cuts:
        path = Path(cut.notice.file_path)
        size = _size(path if path.is_absolute() else root / path)
        cuts.append((cut.step, cut.tool, size, cut.notice.n_bytes))
    return cuts


def _continuation_reads(stats: PromptStats, root: Path) -> list[Rung]:
    """The first continuation read (the others are counted)."""
    if not stats.reads:
        return []
    read = stats.reads[0]
    file = _relative(read.file_path, root)
    offset = f", character {read.start.offset}" if read.start.offset else ""
    if read.follows is None:
        result = "its answer was not seen"
    elif read.follows:
        what = "the saved output" if _saved(file) else "the file"
        result = f"returned the next {read.returned_bytes:,} bytes of {what}"
    else:
        result = "returned text that is NOT the file's next bytes"
    more = len(stats.reads) - 1
    detail = f"read_file {file} from line {read.start.line}{offset}: {result}" + (
        f" (and {more} more continuation reads)" if more > 0 else ""
    )
    return [
        Rung(
            RungKind.CONTINUATION_READ,
            read.step,
            False,
            detail,
            file=file,
            line=read.start.line,
            text=read.returned,
            ok=bool(read.follows),
        )
    ]


def _reliefs(reliefs: list[Announcement]) -> list[Rung]:
    rungs = []
    for relief in reliefs:
        kind = RungKind.MASKING if "masking" in relief.rungs else RungKind.SECOND_TRUNCATION
        detail = (
            f"{relief.tokens_before:,} -> {relief.tokens_after:,} tokens without a model call "
            f"({relief.rungs}); the cut outputs stay readable through their notices"
        )
        rungs.append(
            Rung(kind, relief.step, True, detail, relief.tokens_before, relief.tokens_after)
        )
    return rungs


def _compactions(compactions: list[Announcement], stats: PromptStats) -> list[Rung]:
    rungs = []
    scripted = len(stats.compactor_calls)
    for compaction in compactions:
        model = compaction.source.startswith("model")
        if model and scripted:
            who = "the compactor model (scripted, offline: it wrote the five sections from the "
            who += "transcript it was sent)"
        elif model:
            who = "the compactor model"
        else:
            who = f"the extractive fallback ({compaction.source})"
        where = ", ".join(compaction.files) or "dialog/"
        detail = (
            f"{compaction.tokens_before:,} -> {compaction.tokens_after:,} tokens: "
            f"{compaction.moved} messages moved to {where}; summary by {who}"
        )
        rungs.append(
            Rung(
                RungKind.COMPACTION if model else RungKind.EXTRACTIVE_COMPACTION,
                compaction.step,
                True,
                detail,
                compaction.tokens_before,
                compaction.tokens_after,
                file=compaction.files[0] if compaction.files else None,
            )
        )
    return rungs


def _searches(stats: PromptStats, root: Path) -> list[Rung]:
    rungs = []
    for search in stats.searches:
        file = _relative(search.first_path, root)
        if not search.hits:
            seen = "no hit" if search.hits == 0 else "its answer was not seen"
            rungs.append(
                Rung(
                    RungKind.SEARCH_MISS, search.step, False, f"{search.query!r}: {seen}", ok=False
                )
            )
            continue
        where = f"best in {file} line {search.first_line}"
        if file is not None and file.startswith("dialog/"):
            where += " (a message that left the context at a compaction)"
        elif file is not None and file.startswith("tool_result/"):
            where += " (a saved output)"
        detail = f"{search.query!r}: {search.hits} hit(s), {where}"
        rungs.append(
            Rung(RungKind.SEARCH_HIT, search.step, False, detail, file=file, line=search.first_line)
        )
    return rungs


def collect_rungs(stats: PromptStats, notices: Notices, working_dir: Path) -> list[Rung]:
    """The rungs of a run, in the order they happened."""
    rungs = [
        *_first_truncation(stats, working_dir),
        *_continuation_reads(stats, working_dir),
        *_reliefs(notices.relief_notices),
        *_compactions(notices.compactions, stats),
        *_searches(stats, working_dir),
    ]
    return sorted(rungs, key=lambda rung: rung.at)
