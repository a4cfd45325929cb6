"""`import_archive`: a session archive (`_archive`) restored into the store a config names, a
local working dir or the fleet store, whichever it came from (docs/data.md).

- each output is saved anew for its owner (its agent key and session; ``""`` for an agent
  the archive could not name), byte for byte, and indexed (with the tool call that made it,
  when the archive names it, or the mark of a summary's saved text, `core.search._saved_summary`,
  counted apart): it gets a ref of this store;
- every ref of the archive is rewritten to the new one wherever a dialog record or a step
  names it (the notices), so that `read_file` on a notice reads the restored output;
- the dialog records are appended in their order, for their owners (idempotent by message id
  and owner: importing the same archive again adds no record; it saves its outputs again);
- the steps records go to the steps record of the store;
- the search index catches up, so that `search_history` finds the session.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..core._errors import PersistenceError
from ..core.search._saved_summary import is_saved_summary
from ._archive import Archive
from ._dialog_record import decode_record
from .factory import Stores, open_backend, open_stores

if TYPE_CHECKING:
    from ..core.config._config import ContextConfig

__all__ = ["ImportReport", "import_archive", "rewrite_refs"]


@dataclass
class ImportReport:
    """What an import wrote: records by kind (the summaries' saved texts apart from the tool
    outputs, `core.search._saved_summary`), the tool outputs' bytes, and each old ref's new one."""

    counts: dict[str, int] = field(
        default_factory=lambda: {"outputs": 0, "saved_summaries": 0, "dialog": 0, "steps": 0}
    )
    bytes: int = 0
    refs: dict[str, str] = field(default_factory=dict)


def rewrite_refs(value: Any, refs: dict[str, str]) -> Any:
    """`value` (JSON data) with every old ref of `refs` in its strings replaced by its new one."""
    if isinstance(value, str):
        for old in sorted(refs, key=len, reverse=True):
            if old in value:
                value = value.replace(old, refs[old])
        return value
    if isinstance(value, list):
        return [rewrite_refs(item, refs) for item in value]
    if isinstance(value, dict):
        return {key: rewrite_refs(item, refs) for key, item in value.items()}
    return value


async def import_archive(config: ContextConfig, archive: Archive) -> ImportReport:
    """Restore `archive` into the store `config` names (see the module docstring).

    Raises:
        PersistenceError, OffloadError: the store cannot be written (what was written stays;
            importing again completes it).
    """
    import asyncio

    report = ImportReport()
    opened: dict[tuple[str, str], Stores] = {}

    def stores(agent: str, session: str) -> Stores:
        key = (agent, session)
        if key not in opened:
            opened[key] = open_stores(config, agent=agent, session=session)
        return opened[key]

    try:
        for output in archive.outputs:
            target = stores(output.agent or "", output.session)
            ref = await asyncio.to_thread(target.outputs.save, output.data)
            report.refs[output.ref] = os.fspath(ref)
            if output.tool:  # what a search hit names
                target.search.describe_output(
                    report.refs[output.ref], tool=output.tool, args=output.args
                )
            if is_saved_summary(output.tool):
                report.counts["saved_summaries"] += 1
            else:
                report.counts["outputs"] += 1
                report.bytes += len(output.data)
        for record in archive.dialog:
            record = rewrite_refs(record, report.refs)
            raw = json.dumps(record).encode("ascii")  # (a lone surrogate stays escaped)
            msg = decode_record(raw)
            if isinstance(msg, str):
                raise PersistenceError(f"a dialog record of the archive is not valid: {msg}")
            target = stores(str(record.get("agent") or ""), str(record.get("session") or ""))
            report.counts["dialog"] += await target.dialog.append([msg])
        await asyncio.to_thread(_steps, config, archive, report, rewrite_refs)
        for target in opened.values():
            await asyncio.to_thread(target.search.catch_up, seconds=None)
    finally:
        for target in opened.values():
            target.close()
    return report


def _steps(
    config: ContextConfig,
    archive: Archive,
    report: ImportReport,
    rewrite: Callable[[Any, dict[str, str]], Any],
) -> None:
    if not archive.steps:
        return
    backend = open_backend(config)
    try:
        if backend.steps is None:
            return
        for record in archive.steps:
            backend.steps.append(rewrite(record, report.refs))
            report.counts["steps"] += 1
    finally:
        backend.close()
