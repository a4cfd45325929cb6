"""Issue 46 item 15: the store refuses connections in the middle of a session, and a prompt
must still never go over the budget (DESIGN.md §3, §14), on the installed line (one manager
per session, as a 1.x user or a hand-wired 2.x service has them).

The store is a database of its own on the test server. The agent's tool closes it (no new
connection is accepted, the open ones are ended) and opens it again at given steps; a new
manager takes the session over while it is closed (the next turn served by another worker,
from the state the first one saved). The model records every prompt: each is counted with the
manager's tokenizer against `max_input_tokens`. Once the database is back, what the session
held (outputs kept whole, messages kept in memory) is saved.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from agentscope_ctx import ContextConfig, TokenCounter
from agentscope_ctx.core.truncation._truncation import parse_notice
from tests.fleet.pg_config import PASSWORD_ENV
from tests.fleet.pg_database import Database, own_database  # noqa: F401 (a fixture)
from tests.support.agent_line import Line, Session
from tests.support.chain import follow_chain
from tests.support.fakes import NOTED_SUMMARY
from tests.support.lines import text_of

BUDGET = 3_000
COUNTER = TokenCounter("o200k_base")


def _log(n: int) -> str:
    return "".join(f"10:{i % 60:02d} worker-{n} job={i} status=ok\n" for i in range(150))


def _config(tmp_path: Path, database: Database) -> ContextConfig:
    return ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "w"),
            "max_input_tokens": BUDGET,
            "tool_result": {"recent_max_bytes": 2_000, "old_max_bytes": 1_200},
            "summarizer": {"enabled": False},
            "recall": {"session": "s1"},
            "store": {
                "kind": "postgres",
                "dsn": database.dsn,
                "password_env": PASSWORD_ENV,
                "connect_timeout_seconds": 2,
                "retry_seconds": 0,
            },
        }
    )


async def _sizes(line: Line, session: Session) -> list[int]:
    """The tokens of each prompt `session`'s model received, as the provider gets it."""
    return [
        await COUNTER.count(line.sent(call), tools=call["tools"]) for call in session.model.calls
    ]


def _tool_outputs(session: Session) -> dict[str, str]:
    """The text of each tool result in the agent's memory, by call id."""
    outputs: dict[str, str] = {}
    for msg in session.memory.messages():
        for block in msg.get_content_blocks("tool_result"):
            output = block.get("output")
            texts = [output] if isinstance(output, str) else output or []
            outputs[str(block.get("id"))] = "".join(
                t.get("text", "") if isinstance(t, dict) else str(t) for t in texts
            )
    return outputs


async def test_a_store_that_refuses_connections_never_lets_a_prompt_over_the_budget(
    tmp_path: Path,
    line: Line,
    own_database: Database,  # noqa: F811
) -> None:
    """The database refuses connections from the third tool call of the first turn to the
    last of the second, served by a new manager: no prompt over the budget; once it is back,
    what the session held is saved by the next turn (outputs kept whole are cut with notices
    that read back whole, messages kept in memory are in the dialog and leave it)."""
    database = own_database
    closed_at, opened_at, steps = 2, 13, 14

    def cat(n: int) -> str:
        """Print log n.

        Args:
            n (int): which log.
        """
        if n == closed_at:
            database.close()
        if n == opened_at:
            database.open()
        return _log(n)

    config = _config(tmp_path, database)
    first = line.session(config, line.fake_model(default=NOTED_SUMMARY), [cat])
    await first.turn(
        "Read logs 0 to 4.",
        *[line.tool_call("cat", f"c{n}", n=n) for n in range(5)],
        line.text("Read."),
    )
    sizes = await _sizes(line, first)
    saved = first.saved()
    await first.close()

    # the next turn, on another worker: a manager of its own, the database still closed
    second = line.session(config, line.fake_model(default=NOTED_SUMMARY), [cat], saved)
    try:
        await second.turn(
            f"Read logs 5 to {steps - 1}.",
            *[line.tool_call("cat", f"c{n}", n=n) for n in range(5, steps)],
            line.text("Read."),
        )
        await second.turn("Thanks.")  # the database is open again
        sizes += await _sizes(line, second)
        assert max(sizes) <= BUDGET, sizes  # no prompt over the budget, closed or open
        memory = second.memory
        assert not memory.views and not memory.hidden  # nothing held back once it is open
        stored, _ = await asyncio.to_thread(second.manager.dialog.read)
        dialog = json.dumps([msg.to_dict() for msg in stored])
        outputs = _tool_outputs(second)
        assert len(outputs) < steps  # (compactions were made)

        async def read(path: str, start: int, offset: int) -> str:
            return text_of(await second.manager.reader.read_file(path, start, offset))

        for n in range(steps):  # each output in the context, saved, or in the dialog
            output = outputs.get(f"c{n}")
            if output is None:
                assert f'"c{n}"' in dialog, n
                continue
            parsed = parse_notice(output)
            assert parsed is not None and parsed[1].file_path.startswith("pg-output:"), n
            assert await follow_chain(output, read) == _log(n), n
    finally:
        await second.close()
