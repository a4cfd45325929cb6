"""Benchmark the snapshot of a `read_file` output cut harder (issue 19.1, `_cuts.py`).

Run ``python -m benchmarks.pipeline.read_snapshot``; `main()` returns the numbers as a dict.

Masking a `read_file` output of a workspace file (the default 32 KB excerpt) saves the output
to `tool_result/` first (write + fsync + rename, off the event loop) and cuts it from there;
masking one whose notice names a file of the store only re-cuts the excerpt (`retruncate`).
Both are timed per output (`Cutter.cut(..., mask=True)`), median and p90. The snapshot is
made once per output, when it first shrinks; reading a file copies nothing. Numbers only.
"""

from __future__ import annotations

import asyncio
import shutil
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentscope_ctx.core._entry import Msg
from agentscope_ctx.core.config._config import ToolResultConfig
from agentscope_ctx.core.ladder._cuts import Cutter
from agentscope_ctx.recall._read_file import FileReader
from agentscope_ctx.stores._tool_results import ToolResultPolicy, ToolResultStore


def _text(response: Any) -> str:
    block = response.content[0]
    return str(block["text"] if isinstance(block, dict) else block.text)


async def _run(rounds: int) -> dict[str, Any]:
    root = Path(tempfile.mkdtemp(prefix="bench_read_snapshot_"))
    try:
        policy = ToolResultPolicy(ToolResultConfig())
        store = ToolResultStore(root / "ctx", 7)
        reader = FileReader([root], policy, store_dir=store.dir)
        work = root / "big.py"
        work.write_text(
            "".join(f"    value_{i:05d} = compute({i})  # step\n" for i in range(30_000))
        )
        saved = store.save(work.read_bytes())
        cutter = Cutter(store, policy)
        rows: dict[str, Any] = {}
        for label, path in (("workspace_snapshot", str(work)), ("store_retruncate", str(saved))):
            shown = _text(await reader.read_file(path))
            times = []
            for k in range(rounds):
                block = {"type": "tool_result", "id": f"c{k}", "name": "read_file"}
                block["output"] = [{"type": "text", "text": shown}]
                msg = Msg("system", [block], "system")  # type: ignore[list-item]
                calls = {f"c{k}": ("read_file", {"file_path": path})}
                start = time.perf_counter()
                await cutter.cut(msg, calls, old=True, mask=True)
                times.append((time.perf_counter() - start) * 1e6)
            times.sort()
            rows[label] = {
                "output_bytes": len(shown.encode("utf-8")),
                "median_us": statistics.median(times),
                "p90_us": times[int(0.9 * (len(times) - 1))],
            }
        return rows
    finally:
        shutil.rmtree(root, ignore_errors=True)


def main(rounds: int = 200) -> dict[str, Any]:
    """Time `rounds` masking cuts of each kind; print and return the numbers."""
    rows = asyncio.run(_run(rounds))
    for label, row in rows.items():
        print(
            f"{label}: {row['output_bytes']} B output, mask cut median "
            f"{row['median_us']:.0f} us, p90 {row['p90_us']:.0f} us"
        )
    return rows


if __name__ == "__main__":
    main()
