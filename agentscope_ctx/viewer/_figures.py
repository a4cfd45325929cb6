"""`session_figures`: the counts of a session, once, for the viewer's page and the demo's
report (`agentscope-ctx demo`), which print them under the same names: model calls, the
ladder's reliefs and the compactions (after which call), the messages that left the context,
the saved outputs and their bytes (and, apart, the summaries whose whole text was saved when
they were shown cut: not tool outputs, `core.search._saved_summary`), and each agent's context at
the end."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ._session import SessionView

__all__ = ["SessionFigures", "session_figures"]


@dataclass(frozen=True)
class SessionFigures:
    """A session's counts (see the module docstring)."""

    model_calls: int
    reliefs: tuple[int, ...]
    """For each relief of the ladder's cheap rungs (second truncation, masking), a
    compaction after it or not: the model calls before it (``after step 5``)."""
    compactions: tuple[int, ...]
    """For each compaction: the model calls before it."""
    dialog_messages: int
    """The messages that left the context (its dialog store's)."""
    saved_outputs: int
    """The session's saved outputs (`SessionView.stored`; on the fleet store, those its
    records name)."""
    saved_bytes: int
    """Their bytes in all."""
    saved_summaries: tuple[int, int] = (0, 0)
    """The summaries shown cut whose whole text was saved to ``tool_result/`` beside the
    outputs (`SessionView.saved_summaries`): (files, bytes). Not tool outputs: not in
    `saved_outputs`; each compaction's row of the page shows its summary."""
    context: dict[str, int] = field(default_factory=dict)
    """Each agent's context after its last reply, by the context manager's count."""

    def rows(self) -> list[tuple[str, str]]:
        """The counts as the demo's report names them: (name, value)."""
        rows = [
            ("steps (model calls)", f"{self.model_calls}"),
            (
                "ladder reliefs",
                f"{len(self.reliefs)} without a model call (after steps {_list(self.reliefs)})",
            ),
            ("compactions", f"{len(self.compactions)} (after steps {_list(self.compactions)})"),
            ("messages in dialog/", f"{self.dialog_messages}"),
            (
                "bytes offloaded",
                f"{self.saved_bytes:,} bytes in {self.saved_outputs} tool_result/ files",
            ),
        ]
        files, size = self.saved_summaries
        if files:
            rows.append(
                (
                    "summaries saved whole",
                    f"{size:,} bytes in {files} tool_result/ files (summaries the model was "
                    "shown cut: not tool outputs; each compaction's row has its summary)",
                )
            )
        for agent, tokens in self.context.items():
            rows.append(("context at the end", f"{tokens:,} tokens (agent {agent})"))
        return rows


def session_figures(view: SessionView) -> SessionFigures:
    """The counts of `view` (`load_session`)."""
    saved, size = view.stored or (
        len(view.saved),
        sum(view.sizes.get(ref, 0) for ref in view.saved),
    )
    reliefs, compactions = [], []
    for n, call in enumerate(view.calls):
        if any(call.freed.values()):  # the cheap rungs ran (a compaction may follow them)
            reliefs.append(n)
        if call.compacted:
            compactions.append(n)
    return SessionFigures(
        model_calls=len(view.calls),
        reliefs=tuple(reliefs),
        compactions=tuple(compactions),
        dialog_messages=len(view.dialog) if view.dialog_total is None else view.dialog_total,
        saved_outputs=saved,
        saved_bytes=size,
        saved_summaries=(len(view.saved_summaries), sum(view.saved_summaries.values())),
        context={agent: context.total for agent, _, context in view.contexts},
    )


def _list(values: Sequence[int]) -> str:
    return ", ".join(str(v) for v in values) or "-"
