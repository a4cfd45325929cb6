"""`RetentionConfig`: how long the stores keep each kind of a session's data (DESIGN.md §19,
docs/data.md). `gc` and the background cleanup apply it on both stores."""

from __future__ import annotations

from pydantic import Field

from ._config_base import _Section

__all__ = ["RetentionConfig", "days_or_forever"]


def days_or_forever(days: float | None) -> float | None:
    """`days` as an age limit: `None` for 0 or `None` (kept forever)."""
    return days if days else None


class RetentionConfig(_Section):
    """Days each kind of record is kept; 0 or null keeps it forever. Ages count from the
    record's day (dialog, daily notes), its last use (saved outputs) or its time (steps)."""

    dialog_days: float | None = Field(default=None, ge=0)
    """Days the dialog records are kept (whole days, by the day they were stored under:
    ``dialog/YYYY-MM-DD.jsonl``, the fleet store's rows of that day), with their search
    entries. null or 0: forever."""

    outputs_days: float | None = Field(default=None, ge=0)
    """Days a saved tool output is kept after its last use by a live context (never while a
    live context points to it); a notice to a deleted one reads as deleted by retention.
    null: `tool_result.retention_days` (7 by default); 0: forever."""

    memory_days: float | None = Field(default=None, ge=0)
    """Days the daily long-term notes (``memory/YYYY-MM-DD.md``) are kept; MEMORY.md, what
    consolidation made of them, is kept. null or 0: forever."""

    steps_days: float | None = Field(default=None, ge=0)
    """Days the session viewer's steps records are kept (``usage/steps/``, the fleet
    store's ``steps`` rows). null or 0: forever."""

    def outputs(self, tool_result_days: float) -> float | None:
        """The saved outputs' age limit in days (`None`: forever): `outputs_days`, else
        `tool_result_days` (``tool_result.retention_days``)."""
        if self.outputs_days is None:
            return tool_result_days
        return days_or_forever(self.outputs_days)
