"""`SummaryViews`: the summary message the model sees first (the compact summary, its guide
to the dialog and the long-term note), made once per text and cut by the last-resort fit
(`trim_summary`). A part of `ContextMemory`, kept apart to keep each module to one job."""

from __future__ import annotations

from pathlib import Path

from .._entry import Msg
from ..summary._kept import Kept
from ..summary._summary_text import note_left_out, summary_text
from ._memory_backend import SUMMARY_MSG_NAME

__all__ = ["SummaryViews"]


class SummaryViews:
    """The summary methods of `ContextMemory` (whose `__init__` sets these attributes)."""

    working_dir: Path
    language: str
    long_term_note: str | None
    dialog_days: str | None
    hidden: set[str]
    pending_summary: str | None
    kept: Kept | None
    _compressed_summary: str
    _summary_msg: Msg | None
    _summary_key: tuple[object, ...] | None
    _summary_trim: tuple[str, str | None, str | None, bool, bool] | None

    def offer_long_term(self, note: str | None) -> None:
        """Offer `note` (the head of MEMORY.md) with the summary, from the next prompt on."""
        self.long_term_note = note

    def summary_message(self) -> Msg | None:
        """The first message the model sees, or `None` when there is nothing to present.

        The same `Msg` object (same id) is returned while the text is unchanged, so that
        token counts are cached."""
        summary = self.summary_text()
        note: str | None = self.long_term_note
        trim = self._summary_trim
        if trim is not None and trim[:2] == (summary, note) and trim[4]:
            bare = ("bare", trim[2])
            if bare != self._summary_key:
                self._summary_key = bare
                self._summary_msg = _bare_summary_message(trim[2]) if trim[2] else None
            return self._summary_msg
        shown = self.shown_summary()
        if trim is not None and trim[:2] == (summary, note):
            shown = trim[2] if trim[2] is not None else shown
            if not trim[3] and note:
                path = self.working_dir / "memory" / "MEMORY.md"
                note = note_left_out(path, self.language)
        key = (shown, note, len(self.hidden))
        if key == self._summary_key:
            return self._summary_msg
        self._summary_key = key
        self._summary_msg = self._summary_for(shown, len(self.hidden), note)
        return self._summary_msg

    def summary_message_for(self, summary: str) -> Msg | None:
        """The summary message the model would see with `summary` as the summary (all
        messages saved), without the long-term note (a compaction does not change it): what a
        compaction would leave, and what it replaces, counted alike before making it."""
        return self._summary_for(summary, 0, None)

    def _summary_for(self, summary: str, unsaved: int, note: str | None) -> Msg | None:
        text = summary_text(
            summary, unsaved, note, self.working_dir, self.language, days=self.dialog_days
        )
        return Msg(SUMMARY_MSG_NAME, text, "user") if text else None

    def whole_summary_message(self) -> Msg | None:
        """The summary message as it is without any last-resort cut (`trim_summary`)."""
        return self._summary_for(self.summary_text(), len(self.hidden), self.long_term_note)

    def summary_text(self) -> str:
        """The summary the summary message presents, whole ("" if none)."""
        return (self.pending_summary if self.hidden else self._compressed_summary) or ""

    def shown_summary(self) -> str:
        """The summary as the model is shown it but for the last-resort fit: held to its
        share of the budget after the compaction that wrote it (`Kept.shown`), else whole."""
        summary = self.summary_text()
        kept = None if self.hidden else self.kept  # (a pending summary carries its own)
        return summary if kept is None else kept.shown_summary(summary)

    def trimmed_summary(self) -> str | None:
        """The cut of the summary the model is shown (the fit's, see `trim_summary`, else
        the one it is held to after a compaction), if any."""
        trim = self._summary_trim
        if trim is None or trim[:2] != (self.summary_text(), self.long_term_note):
            shown = self.shown_summary()
            return None if shown == self.summary_text() else shown
        return trim[2]

    def trim_summary(self, shown: str | None, *, note: bool, bare: bool = False) -> None:
        """The last resort of the pipeline's fit: show the model `shown` (a cut of
        `summary_text`, whose whole text was saved first; `None`: the summary itself) and,
        unless `note`, a pointer to MEMORY.md instead of the long-term note. With `bare`,
        `shown` stands for the whole message (a notice pointing at its saved text, long-term
        note and guide included): the model is shown it alone, and no summary message at
        all when it is empty. Holds until the summary or the note changes; nothing stored
        changes."""
        self._summary_trim = (self.summary_text(), self.long_term_note, shown, note, bare)


def _bare_summary_message(shown: str) -> Msg:
    """The summary message the last-resort fit leaves: `shown` (a notice pointing at the
    whole message's saved text) alone."""
    return Msg(SUMMARY_MSG_NAME, f"<compact_summary>\n{shown}\n</compact_summary>", "user")
