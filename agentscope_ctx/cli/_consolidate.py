"""`agentscope-ctx consolidate`: merge the recent daily notes into MEMORY.md, of a working
dir's ``memory/``, or, with a config naming the fleet store (``store.kind: postgres``), of
each agent's memory in the database (``--agent`` to name some; default: every agent that has
one)."""

from __future__ import annotations

import argparse
import asyncio
from pathlib import Path

from ..core._errors import ContextError
from ..memory._consolidation import ConsolidationReport, consolidate
from ..stores.memory_seam import MemorySeam
from ._common import CliError, UsageError, _load_config, _state_dir

__all__ = ["_cmd_consolidate"]


def _cmd_consolidate(args: argparse.Namespace) -> int:
    config = _load_config(args.config)
    days = args.days or (config.consolidation.days if config else 7)
    memories: list[tuple[str, Path | MemorySeam]] = []
    backend = None
    if config is not None and config.store.kind == "postgres":
        from ..stores.factory import open_backend

        backend = open_backend(config)
        assert backend.memory is not None and backend.memory_agents is not None
        try:
            agents = args.agent or backend.memory_agents()
        except ContextError as exc:
            raise CliError(str(exc)) from None
        for agent in agents:
            memories.append((f"the memory of agent {agent!r}", backend.memory(agent)))
        if not memories:
            print("consolidate: no agent has a long-term memory in the store")
            return 0
    else:
        if args.agent:
            raise UsageError("--agent needs a config naming the fleet store (postgres)")
        path = _state_dir(args.working_dir, config)
        memories.append((str(path / "memory" / "MEMORY.md"), path))
    try:
        for where, memory in memories:
            try:
                report = asyncio.run(consolidate(memory, days=days))
            except ContextError as exc:
                raise CliError(str(exc)) from None
            _print(report, where)
    finally:
        if backend is not None:
            backend.close()
    return 0


def _print(report: ConsolidationReport, where: str) -> None:
    if report.skipped:
        print(f"consolidate: skipped ({report.reason})")
    elif not report.notes:
        print(f"consolidate: nothing new to merge into {where}")
    else:
        print(
            f"consolidate: merged {len(report.notes)} daily note(s) "
            f"({', '.join(report.notes)}) into {where}: {report.added} new bullet(s), by "
            f"{report.source}" + (f" ({report.reason})" if report.reason else "")
        )
