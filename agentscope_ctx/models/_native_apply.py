"""A provider's compaction taken into the memory: what it replaced leaves, saved first.

After a native-mode model call whose response opened with the provider's block
(`models._native`), the messages that call sent stand replaced by the block. `apply_native`
does to the memory what a local compaction does (DESIGN.md §3): the replaced messages are
appended to the dialog store, **durably, before** they leave memory, followed by a record
that keeps the block beside them (a message of ``agentscope_ctx`` whose metadata
``agentscope_ctx.native`` holds the provider, the block and the ids it replaced); then they
are removed and the summary becomes the block's stand-in (`stand_in`). What the summary
carried by code (the user's words, the artifact trail) stays as data for the next local
compaction. The memory is the core's `ContextMemory` on either line (2.x: after the mirror
pulled the state). A dialog store that fails raises `PersistenceError` and nothing is
removed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..core._entry import Msg
from ._native import NATIVE_RECORD, NativeKind, stand_in

if TYPE_CHECKING:
    from ..core._seams import DialogSeam
    from ..core.context._memory import ContextMemory

__all__ = ["NATIVE_NAME", "apply_native"]

NATIVE_NAME = "agentscope_ctx"
"""The name of the dialog record that keeps a provider's block."""


async def apply_native(
    memory: ContextMemory,
    dialog: DialogSeam,
    kind: NativeKind,
    block: dict[str, Any],
    replaced: Sequence[str],
) -> int:
    """Take the provider's `block` (of `kind`), which replaced the messages `replaced`
    (ids), into `memory` (see the module docstring). Returns how many messages left (0:
    none of them is in memory any more: nothing is done).

    Raises:
        PersistenceError: the dialog store could not save them; nothing was removed.
    """
    ids = set(replaced)
    leaving = [m for m in memory.messages() if m.id in ids and m.id not in memory.hidden]
    if not leaving:
        return 0
    text = stand_in(kind, block, len(leaving))
    record = Msg(
        NATIVE_NAME,
        text,
        "assistant",
        metadata={
            NATIVE_RECORD: {
                "provider": kind,
                "block": block,
                "replaced": [m.id for m in leaving],
            }
        },
    )
    await dialog.append([*leaving, record])  # write-ahead: durable before removal
    await memory.delete([m.id for m in leaving])
    await memory.update_compressed_summary(text, kept=memory.kept)
    return len(leaving)
