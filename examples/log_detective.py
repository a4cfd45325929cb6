"""Run the offline log-detective demo from Python (same as `agentscope-ctx demo logs`).
On either AgentScope line.

    python examples/log_detective.py [WORKING_DIR]

No API key needed: the model is scripted; the agent, tools, files, truncation and
compaction are real. Ends with a report and `report.svg` in the working dir.
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
from pathlib import Path

from agentscope_ctx.demo import run_demo


async def main() -> None:
    working_dir = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(tempfile.mkdtemp())
    report = await run_demo("logs", working_dir)
    assert report.peak <= report.budget
    print(f"\nchart: {report.chart}")


if __name__ == "__main__":
    asyncio.run(main())
