"""The provider's cache figures in the steps record and the viewer (issue 45 item 3): a usage
line folds into the step record before it (across a rotation too), a version-1 record still
reads (its figures unknown), and the page shows a cache column and a cache-read line, in
chromium."""

from __future__ import annotations

import json
from pathlib import Path

from agentscope_ctx.cli import main
from agentscope_ctx.core._tenant import owner_tag
from agentscope_ctx.stores._steps_file import StepFile, step_records
from agentscope_ctx.viewer._session import fold
from tests.support.browser import open_page

A_TAG = owner_tag("a")  # an agent's steps file is named by its key's tag


def _step(run: int, before: int) -> dict[str, object]:
    return {
        "agent": "a",
        "session": "s",
        "run": run,
        "call": True,
        "before": before,
        "after": before,
        "threshold": 6_000,
        "budget": 8_000,
        "freed": {},
        "compacted": 0,
        "outputs": [],
    }


def _usage(run: int, read: int | None, written: int | None) -> dict[str, object]:
    return {
        "kind": "usage",
        "agent": "a",
        "session": "s",
        "run": run,
        "input": 5_000 + run,
        "cache_read": read,
        "cache_creation": written,
    }


def test_a_usage_line_folds_into_its_step_and_old_records_read() -> None:
    old = json.dumps({"v": 1, **_step(1, 4_000)})
    lines = [old] + [json.dumps({"v": 2, **r}) for r in (_step(2, 5_000), _usage(2, 4_096, 512))]
    lines.append(json.dumps({"v": 3, **_step(3, 1)}))  # a later version: skipped
    lines.append(json.dumps({"v": 2, **_usage(9, 1, 1)}))  # no step before it: dropped
    records = step_records(lines)
    assert [(r["run"], r["input"], r["cache_read"], r["cache_creation"]) for r in records] == [
        (1, None, None, None),
        (2, 5_002, 4_096, 512),
    ]


def test_a_usage_line_finds_its_step_across_a_rotation(tmp_path: Path) -> None:
    steps = StepFile(tmp_path, max_bytes=700)
    for run in range(1, 8):
        steps.append(_step(run, 1_000 * run))
        steps.append(_usage(run, 100 * run, None))
    folder = tmp_path / "usage" / "steps" / "s"
    assert sorted(p.name for p in folder.iterdir()) == [f"{A_TAG}.1.jsonl", f"{A_TAG}.jsonl"]
    records = steps.read("s")
    assert all(r["cache_read"] == 100 * r["run"] for r in records)
    assert all(r["cache_creation"] is None for r in records)  # not reported: null, never 0


async def test_the_page_shows_the_cache_column_and_line_in_chromium(tmp_path: Path) -> None:
    steps = StepFile(tmp_path)
    figures = [(None, None), (0, 3_000), (2_900, 400), (3_300, 200)]
    for run, (read, written) in enumerate(figures, start=1):
        steps.append(_step(run, 3_000 + 400 * run))
        if run > 1:  # the first call's usage never came (a record of before this version)
            steps.append(_usage(run, read, written))
    calls = fold(steps.read("s"))
    assert [(c.cache_read, c.cache_creation) for c in calls] == figures
    page_file = tmp_path / "view.html"
    assert main(["view", str(tmp_path), "--session", "s", "-o", str(page_file)]) == 0
    async with open_page(page_file) as (page, errors):
        header = await page.locator("table#calls th").all_inner_texts()
        assert "cache read" in header
        cells = await page.locator("table#calls td.cache").all_inner_texts()
        assert cells == [
            "–",
            "0 (+3,000 written)",
            "2,900 (+400 written)",
            "3,300 (+200 written)",
        ]
        line = page.locator("svg#timeline polyline.cache_read")
        assert await line.count() == 1 and await line.is_visible()
        points = (await line.get_attribute("points") or "").split()
        assert len(points) == 3  # the calls that reported a cache read
        ys = [float(p.split(",")[1]) for p in points]
        assert ys[0] > ys[1] > ys[2]  # 0, then more read each call: higher on the chart
        legend = await page.locator("svg#timeline text").all_text_contents()
        assert "cache read" in legend
    assert errors == []
