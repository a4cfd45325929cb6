"""One short session that leaves two cut outputs in the dialog store, for the tests of what
reads a session back (export and import, the viewer): one turn of two `cat` calls whose
outputs are cut, then long turns that pass the trigger (a compaction, where the config has a
compactor, moves them to the dialog)."""

from __future__ import annotations

from collections.abc import Mapping

from agentscope_ctx import ContextConfig
from tests.support.agent_line import Line

OUTPUTS = {
    "log": "".join(f"line {n} of the quokka log\r\n" for n in range(300)),  # CRLF
    "cjk": "日志 wombat 🙂 " * 400 + "no final newline",
}
"""The two outputs, by `cat`'s argument: CRLF lines, and CJK with an emoji and no final
newline."""


async def two_outputs_session(
    line: Line, config: ContextConfig, outputs: Mapping[str, str] = OUTPUTS
) -> None:
    """Run the session on `line` with `config` (on the line's scripted model)."""
    session = line.session(config, line.fake_model(default="ok"), {"cat": outputs.__getitem__})
    await session.turn(
        "show both",
        line.tool_call("cat", call_id="c1", arg="log"),
        line.tool_call("cat", call_id="c2", arg="cjk"),
        line.text("seen both"),
    )
    for n in range(4):  # long turns: the prompt passes the trigger
        await session.turn(f"turn {n}: " + "a long question about the platypus " * 60)
    await session.close()
