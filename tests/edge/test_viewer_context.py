"""Issue 48: the viewer shows what is in the context at the end, as Claude Code's ``/context``
does: per agent of the session, a bar of the budget (each part, what is free below the
trigger, the reserve above it) and a table of the parts, from the breakdown the agent's last
reply left in its usage record. A real agent of the installed line, the page opened in
chromium (Playwright; skipped without them, failed under CI, as tests/edge/test_viewer.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_ctx import ContextConfig
from agentscope_ctx.cli import main
from agentscope_ctx.services._breakdown import PART_LABELS
from agentscope_ctx.viewer import load_session, render_page
from agentscope_ctx.viewer._session import SessionView
from tests.support.agent_line import Line
from tests.support.browser import open_page


def _dump(arg: str) -> str:
    return "".join(f"build step {n}: compiled module {arg}{n}\n" for n in range(300))


async def _session_dir(tmp_path: Path, line: Line) -> tuple[Path, dict[str, int]]:
    """A working dir of session s-1 after a reply with a masked and a cut output; the live
    breakdown's messages per part at the end of it."""
    config = ContextConfig(
        working_dir=tmp_path / "ctx",
        max_input_tokens=20_000,
        clear_at_least=0,
        tool_result={"recent_n": 1, "mask_after": 1, "recent_max_bytes": 2_000,
                     "old_max_bytes": 1_024},
        recall={"session": "s-1"},  # type: ignore[arg-type]
        summarizer={"enabled": False},  # type: ignore[arg-type]
    )  # fmt: skip
    session = line.session(config, None, {"dump": _dump})
    try:
        await session.turn(
            "Build core and util.",
            line.tool_call("dump", arg="core"),
            line.tool_call("dump", arg="util"),
            line.text("built both"),
        )
        live = await session.manager.context_breakdown(session.agent)
    finally:
        await session.close()
    return config.working_dir, dict(live.messages)


async def test_the_page_shows_the_context_at_the_end_in_chromium(
    tmp_path: Path, line: Line, capsys: pytest.CaptureFixture[str]
) -> None:
    working_dir, messages = await _session_dir(tmp_path, line)
    assert messages["masked_outputs"] == 1 and messages["cut_outputs"] == 1
    (agent, _, context) = load_session(ContextConfig(working_dir=working_dir), "s-1").contexts[0]
    assert agent == "coder" and dict(context.messages) == messages
    page_file = tmp_path / "view.html"
    assert main(["view", str(working_dir), "--session", "s-1", "-o", str(page_file)]) == 0
    capsys.readouterr()
    async with open_page(page_file) as (page, errors):
        box = page.locator('#contexts .context[data-agent="coder"]')
        assert await box.is_visible()
        assert await box.locator("tr.part").count() == len(PART_LABELS)
        rows = {
            str(await row.get_attribute("data-part")): await row.locator("td").all_inner_texts()
            for row in await box.locator("tr.part").all()
        }
        assert rows["cut_outputs"][1] == "1" and rows["masked_outputs"][1] == "1"
        assert rows["system_prompt"][1] == ""  # (no messages: a fixed part)
        for name, cells in rows.items():
            assert cells[2] == f"{getattr(context, name):,}", (name, cells)
        free = await box.locator("tr.free td").all_inner_texts()
        assert f"{context.free_below_trigger:,}" in free
        # the bar: one segment per part that holds tokens, then the free space, within it
        drawn = box.locator(".bar span.part")
        shown = [str(await s.get_attribute("data-part")) for s in await drawn.all()]
        assert shown == [name for name, _, tokens in context.parts() if tokens]
        bar = await box.locator(".bar").bounding_box()
        widths = [
            (await s.bounding_box() or {"width": 0})["width"]
            for s in await box.locator(".bar span.part, .bar .free, .bar .reserve").all()
        ]
        assert bar is not None and abs(sum(widths) - (bar["width"] - 2)) < 2, (widths, bar)
    assert errors == []


def test_a_session_without_a_breakdown_says_so() -> None:
    html = render_page(SessionView("s", "local"))
    assert 'id="no-context"' in html and 'class="context"' not in html
