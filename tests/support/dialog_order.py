"""What `dialog/` and the memory hold together, as the tests check it.

Every message is in `dialog/` or in memory, in the order it was added. The one kind of
message in both: a user turn that stayed in the prompt (the current user turn never leaves
it, DESIGN.md §13) while the agent's work around it was compacted; it is written to
`dialog/` with that older part, in its place, and stays in memory until it leaves.
"""

from __future__ import annotations

from collections.abc import Sequence

from tests.support.lines import Msg


def dialog_then_live(stored: Sequence[Msg], live: Sequence[Msg]) -> list[str]:
    """The ids of `dialog/` then of the memory, each once; fails if a message other than a
    user turn is in both."""
    stored_ids = {m.id for m in stored}
    both = [m for m in live if m.id in stored_ids]
    assert all(m.role == "user" for m in both), [m.to_dict() for m in both]
    return [m.id for m in stored] + [m.id for m in live if m.id not in stored_ids]
