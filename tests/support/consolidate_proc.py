"""One `consolidate` run in its own process (tests/agentscope1/test_concurrency.py).

    python -m tests.support.consolidate_proc WORKING_DIR GO_FILE [--model-delay SECONDS]

Waits until GO_FILE exists (so that several processes start the run together), runs
`agentscope_ctx.memory._consolidation.consolidate` (with a scripted model that takes `--model-delay`
seconds to answer, or extractively without `--model-delay`), and prints the report as JSON.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import json
import sys
import time
from pathlib import Path
from typing import Any

from agentscope.formatter import OpenAIChatFormatter

from agentscope_ctx.memory._consolidation import consolidate
from tests.support.fakes import FakeChatModel


class SlowModel(FakeChatModel):
    """Answers with a merged MEMORY.md after `delay` seconds (the lock is held meanwhile)."""

    def __init__(self, delay: float, answer: str) -> None:
        super().__init__(default=answer)
        self.delay = delay

    async def __call__(self, messages: list[dict[str, Any]], *args: Any, **kwargs: Any) -> Any:
        await asyncio.sleep(self.delay)
        return await super().__call__(messages, *args, **kwargs)


MODEL_ANSWER = "# Long-term memory\n\n- the user prefers pytest\n- run ruff before committing"


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("working_dir", type=Path)
    parser.add_argument("go_file", type=Path)
    parser.add_argument("--model-delay", type=float, default=None)
    args = parser.parse_args(argv)
    print("READY", flush=True)
    deadline = time.monotonic() + 30
    while not args.go_file.exists():
        if time.monotonic() > deadline:
            return 2
        time.sleep(0.001)
    started = time.time()
    if args.model_delay is None:
        report = await consolidate(args.working_dir)
    else:
        report = await consolidate(
            args.working_dir,
            model=SlowModel(args.model_delay, MODEL_ANSWER),
            formatter=OpenAIChatFormatter(),
        )
    print(
        json.dumps({**dataclasses.asdict(report), "started": started, "ended": time.time()}),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
