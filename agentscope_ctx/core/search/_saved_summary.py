"""How a summary's text saved whole to `tool_result/` is told apart from a tool's output.

When the summary message is shown cut (held to its share of a small budget after a
compaction, `ladder._summary_fit.cap_writer`, or trimmed by the last-resort fit,
`fit_summary`), its whole text is saved to the output store first, as a cut tool output is,
and the notice points there: `read_file` reads on, `search_history` finds it. The store then
names it as it names the tool call that made an output (`Cutter.describe`: the owners record
of the search index, on either store), with `SAVED_SUMMARY` for the tool: a name no tool can
have (a provider's tool names are letters, digits, ``_`` and ``-``). Export, `import`, the
viewer and `inspect` count such a file apart from the tool outputs (docs/data.md). A file
saved before this mark existed, or while recall is off (the store then keeps no owners
record), has no mark and counts as an output with no tool, as it did before; so does one
whose local index was rebuilt (a cache: no dialog record names the file, from which an
output's tool is learnt again; PostgreSQL's rebuild keeps the owners). The name lives
with the search because the search index's owners record is where it is kept, and a search
hit on such a file says what it is (`_search_hits`)."""

from __future__ import annotations

__all__ = ["SAVED_SUMMARY", "is_saved_summary"]

SAVED_SUMMARY = "agentscope_ctx.summary"
"""The tool name a saved summary is recorded under (see the module docstring)."""


def is_saved_summary(tool: object) -> bool:
    """Whether `tool`, as a store recorded it for a saved file, marks a summary's text."""
    return tool == SAVED_SUMMARY
