"""One process indexing into a shared working dir (tests/stores/test_search.py).

    python -m tests.support.search_proc WORKING_DIR GO_FILE NAME [--rounds N]

Prints READY, waits until GO_FILE exists (so that several processes start together), then
for each round saves a tool output (a real `ToolResultStore`, notifying the index), appends
two dialog records (a real `DialogStore`, notifying the index) and searches. Prints a JSON
summary: what it wrote and how many of its own searches found their target
(tests/stores/test_search.py runs it from its `Forker`: no second import of AgentScope).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from pathlib import Path

from agentscope_ctx.core._entry import Msg
from agentscope_ctx.stores._dialog import DialogStore
from agentscope_ctx.stores._search import Filters, SearchIndex
from agentscope_ctx.stores._tool_results import ToolResultStore


def output_text(name: str, k: int) -> str:
    return "".join(f"{name} round {k} line {i} token{name}x{k}y{i}\n" for i in range(300))


async def run(
    working_dir: Path, go: Path, name: str, rounds: int, *, quiet: bool = False
) -> dict[str, object]:
    index = SearchIndex(working_dir)
    store = ToolResultStore(
        working_dir, 7, on_saved=lambda path: index.output_saved(path, agent=name)
    )
    dialog = DialogStore(
        working_dir, record_fields={"agent": name}, on_append=index.dialog_appended
    )
    if not quiet:
        print("READY", flush=True)
    while not go.exists():
        time.sleep(0.005)
    found = 0
    for k in range(rounds):
        await asyncio.to_thread(store.save, output_text(name, k))
        await dialog.append(
            [
                Msg("user", f"{name} asks question q{name}{k}", "user"),
                Msg(name, f"{name} answers a{name}{k}", "assistant"),
            ]
        )
        result = await asyncio.to_thread(
            index.search, f"token{name}x{k}y150", Filters(agent=name), limit=3
        )
        found += any("150" in text for hit in result.hits for _, text in hit.lines)
    index.close()  # writes the owners it kept while the other process held the index
    return {"name": name, "rounds": rounds, "found": found}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("working_dir")
    parser.add_argument("go")
    parser.add_argument("name")
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    summary = asyncio.run(run(Path(args.working_dir), Path(args.go), args.name, args.rounds))
    print(json.dumps(summary), flush=True)


if __name__ == "__main__":
    sys.exit(main())
