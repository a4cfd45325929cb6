"""Recall through a real `ReActAgent`: `search_history` finds what left the context, within
the agent's scope; the eviction index; the `agentscope-ctx search` command."""

from __future__ import annotations

import asyncio
import json
import re
import statistics
from pathlib import Path
from typing import Any

import pytest

from tests.support.lines import IS_1X, reason_1x

if not IS_1X:
    pytest.skip(
        reason_1x("search_history on a ReActAgent through ContextManager"), allow_module_level=True
    )

from agentscope.agent import ReActAgent
from agentscope.formatter import OpenAIChatFormatter
from agentscope.message import Msg, TextBlock
from agentscope.tool import Toolkit, ToolResponse

from agentscope_ctx import ContextConfig, ContextManager
from agentscope_ctx.cli import main as cli_main
from agentscope_ctx.cli._read import read_command
from agentscope_ctx.core.summary._eviction import EVICTION_HEADER
from agentscope_ctx.core.truncation._truncation import Position
from agentscope_ctx.recall._recall import eviction_index
from tests.support.fakes import FakeChatModel, text, tool_call

POINTER = re.compile(
    r"read on: read_file file_path=(?P<path>\S+) start_line=(?P<line>\d+)"
    r"(?: line_offset=(?P<offset>\d+))?"
)
NAMES = [f"{a}{b}" for a in ("ka", "lo", "mi", "ne", "pu", "ri", "so", "tu") for b in "bcdfgjx"]
SIZES = (200, 500, 1_000, 2_000, 3_500, 5_000, 7_000, 9_000, 11_000, 13_000, 15_000, 17_000)
SIZES += (18_500, 20_000)


def fact(k: int) -> tuple[str, str, str]:
    """(sentence, query naming it, secret) of fact `k`."""
    name = NAMES[k] + "zor"
    secret = f"{name.upper()}-{(k * 7919) % 10_000:04d}"
    return f"the deploy token for service {name} is {secret}", f"deploy token {name}", secret


def report_text(n: int, lines: int) -> str:
    """A log of `lines` lines with facts 3n, 3n+1, 3n+2 on its first, middle and last line."""
    body = [
        f"2026-12-02T10:{i % 60:02d}:{(i * 7) % 60:02d}Z INFO worker-{i % 8} report {n} "
        f"processed batch {i} in {(i * 37) % 900}ms status=200"
        for i in range(lines)
    ]
    for k, at in zip((3 * n, 3 * n + 1, 3 * n + 2), (0, lines // 2, lines - 1), strict=True):
        body[at] = f"{body[at]} NOTE {fact(k)[0]}"
    return "\n".join(body) + "\n"


def make_agent(name: str, model: FakeChatModel) -> ReActAgent:
    toolkit = Toolkit()

    def run_report(n: int, lines: int) -> ToolResponse:
        """Produce report n.

        Args:
            n (int): which report.
            lines (int): how many lines.
        """
        return ToolResponse(content=[TextBlock(type="text", text=report_text(n, lines))])

    toolkit.register_tool_function(run_report)
    return ReActAgent(
        name=name,
        sys_prompt="You are a careful operator.",
        model=model,
        formatter=OpenAIChatFormatter(),
        toolkit=toolkit,
        max_iters=6,
    )


def last_tool_output(model: FakeChatModel, call_id: str) -> str:
    """The text of the tool result `call_id` as the model last received it."""
    for message in reversed(model.calls[-1]["messages"]):
        if message.get("role") == "tool" and message.get("tool_call_id") == call_id:
            content = message.get("content")
            if isinstance(content, list):
                return "".join(str(part.get("text", "")) for part in content)
            return str(content)
    raise AssertionError(f"no tool result {call_id!r} in the last prompt")


async def ask(agent: ReActAgent, model: FakeChatModel, call: Any, call_id: str) -> str:
    model.enqueue(call, text("ok"))
    await agent(Msg("user", "go on", "user"))
    return last_tool_output(model, call_id)


async def test_every_planted_fact_is_found_in_one_or_two_calls(tmp_path: Path) -> None:
    """The issue's scenario: 56 facts planted at every depth of a long session at a 24k
    budget (user turns; start, middle and end of outputs of 200 to 20,000 lines). Each is
    found by `search_history` with a query naming it: shown by the hit, or by one `read_file`
    from the hit's pointer. Median 1 call, none over 2."""
    config = ContextConfig(
        working_dir=tmp_path / "ctx",
        max_input_tokens=24_000,
        token_counter="cl100k_base",
        # the session: what leaves the context leaves by compaction (masking would
        # keep the user turns, and with them most facts, in the prompt)
        tool_result={"mask_after": None, "recent_max_share": None},
    )
    manager = ContextManager(config)
    model = FakeChatModel()
    agent = make_agent("operator", model)
    manager.attach(agent)
    user_facts = range(3 * len(SIZES), 3 * len(SIZES) + len(SIZES))
    for n, (lines, k) in enumerate(zip(SIZES, user_facts, strict=True)):
        model.enqueue(tool_call("run_report", call_id=f"r{n}", n=n, lines=lines), text("done"))
        await agent(Msg("user", f"Note: {fact(k)[0]}. Now run report {n}.", "user"))
    assert len(user_facts) + 3 * len(SIZES) == 56
    prompt = json.dumps(model.calls[-1]["messages"], ensure_ascii=False)
    # The user's own words are carried by code across compactions (DESIGN.md §13): their
    # facts stay in the prompt. Most facts of the tool outputs left it.
    assert all(fact(k)[2] in prompt for k in user_facts)
    in_prompt = [k for k in range(3 * len(SIZES)) if fact(k)[2] in prompt]
    assert len(in_prompt) < 14, in_prompt
    # What left the context is indexed before the searches (the background's work, which a
    # live session gives the time between its model calls; here the calls come back to back,
    # and under a loaded CI run 3 big outputs were still pending at the 35th search: "search
    # again in a moment"): this test is about what a search finds, not how fast it indexes
    await asyncio.to_thread(manager.search_index.catch_up, seconds=None)

    calls: list[int] = []
    for k in range(56):
        _, query, secret = fact(k)
        found = await ask(agent, model, tool_call("search_history", f"s{k}", query=query), f"s{k}")
        if secret in found:
            calls.append(1)
            continue
        pointer = POINTER.search(found)
        assert pointer is not None, found
        read = tool_call(
            "read_file",
            f"f{k}",
            file_path=pointer["path"],
            start_line=int(pointer["line"]),
            line_offset=int(pointer["offset"] or 0),
        )
        assert secret in await ask(agent, model, read, f"f{k}"), (k, found)
        calls.append(2)
    assert statistics.median(calls) == 1
    assert max(calls) <= 2
    await manager.close()


async def run_one(agent: ReActAgent, model: FakeChatModel, n: int, lines: int, note: str) -> None:
    model.enqueue(tool_call("run_report", call_id=f"{agent.name}{n}", n=n, lines=lines), "ok")
    await agent(Msg("user", note, "user"))


async def test_two_agents_on_one_working_dir_search_their_own_history(tmp_path: Path) -> None:
    config = ContextConfig(
        working_dir=tmp_path,
        max_input_tokens=8_000,
        token_counter="cl100k_base",
        # both agents compact, so that their records go to dialog/: no masking, and fresh
        # outputs as large as the byte limit allows
        tool_result={"mask_after": None, "recent_max_share": None},
    )
    manager = ContextManager(config)
    models = {name: FakeChatModel() for name in ("alice", "bob")}
    agents = {name: make_agent(name, model) for name, model in models.items()}
    for agent in agents.values():
        manager.attach(agent)
    for n in range(3):  # enough to compact both: their records go to the shared dialog/
        await run_one(agents["alice"], models["alice"], n, 3_000, f"alice note {fact(40 + n)[0]}")
        await run_one(agents["bob"], models["bob"], 10 + n, 3_000, f"bob note {fact(50 + n)[0]}")
    records = [
        json.loads(line)
        for path in sorted((tmp_path / "dialog").glob("*.jsonl"))
        for line in path.read_text(encoding="utf-8").splitlines()
    ]
    assert {r.get("agent") for r in records} == {"alice", "bob"}

    for name, own, other in (("alice", (0, 40), (30, 50)), ("bob", (30, 50), (0, 40))):
        for k in own:  # a fact in its own output (report 0 / 10) and its own user turn
            found = await ask(
                agents[name],
                models[name],
                tool_call("search_history", f"{name}-own{k}", query=fact(k)[1]),
                f"{name}-own{k}",
            )
            assert fact(k)[2] in found, found
        for k in other:
            found = await ask(
                agents[name],
                models[name],
                tool_call("search_history", f"{name}-other{k}", query=fact(k)[1]),
                f"{name}-other{k}",
            )
            assert fact(k)[2] not in found, found

    shared = ContextManager(ContextConfig(working_dir=tmp_path, recall={"scope": "shared"}))
    carol_model = FakeChatModel()
    carol = make_agent("carol", carol_model)
    shared.attach(carol)
    for k in (0, 30, 40, 50):
        found = await ask(
            carol, carol_model, tool_call("search_history", f"c{k}", query=fact(k)[1]), f"c{k}"
        )
        assert fact(k)[2] in found and "· agent " in found, found
    await manager.close()
    await shared.close()


# -- the tool ---------------------------------------------------------------------------------


async def attached(tmp_path: Path, **fields: Any) -> tuple[ContextManager, ReActAgent, Any]:
    config = ContextConfig(working_dir=tmp_path, token_counter="cl100k_base", **fields)
    manager = ContextManager(config)
    model = FakeChatModel()
    agent = make_agent("operator", model)
    manager.attach(agent)
    return manager, agent, model


async def test_search_history_is_registered_names_the_tool_and_filters_by_it(
    tmp_path: Path,
) -> None:
    manager, agent, model = await attached(tmp_path)
    assert "search_history" in agent.toolkit.tools
    await run_one(agent, model, 3, 5_000, "run it")  # cut, saved, still in the context
    found = await ask(
        agent,
        model,
        tool_call("search_history", "s", query=fact(10)[1], tool="run_report", role="tool"),
        "s",
    )
    assert fact(10)[2] in found
    assert "saved output of run_report(n=3, lines=5000)" in found
    other = await ask(
        agent, model, tool_call("search_history", "t", query=fact(10)[1], tool="grep"), "t"
    )
    assert other.startswith("No hits")
    manager.detach(agent)
    assert "search_history" not in agent.toolkit.tools
    assert not any("recall" in name for name in agent._instance_post_acting_hooks)
    await manager.close()


async def test_half_an_emoji_in_a_reply_never_disables_search_history(tmp_path: Path) -> None:
    """A model's text with a lone surrogate leaves the context into dialog/ (issue #19, item
    7): before, every search_history call answered a UTF-8 error from then on."""
    manager, agent, model = await attached(
        tmp_path, max_input_tokens=8_000, tool_result={"mask_after": None, "recent_max_share": None}
    )
    agent.set_console_output_enabled(False)  # AgentScope's printing cannot encode it
    model.enqueue(text("half an emoji \ud83d: the quokka code is 77"))
    await agent(Msg("user", "say it", "user"))
    for n in range(3):  # compaction moves the reply (and what follows) to dialog/
        await run_one(agent, model, n, 3_000, f"note {fact(40 + n)[0]}")
    stored, _ = manager.dialog.read()
    texts = [b.get("text") for m in stored for b in m.get_content_blocks("text")]
    assert "half an emoji \ud83d: the quokka code is 77" in texts  # stored exactly
    found = await ask(agent, model, tool_call("search_history", "s1", query="quokka code"), "s1")
    assert "| half an emoji \ufffd: the quokka code is 77" in found, found
    found = await ask(agent, model, tool_call("search_history", "s2", query=fact(41)[1]), "s2")
    assert fact(41)[2] in found, found
    await manager.close()


async def test_a_reply_never_waits_for_another_process_holding_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #19, item 8: a process holding an index write made one reply with one tool call
    take 75 s (each save waited for it)."""
    import asyncio

    import agentscope_ctx.stores._search_txn as search_txn
    from tests.stores.test_search import HANG_SECONDS, holding

    monkeypatch.setattr(search_txn, "BUSY_SECONDS", 3_600.0)  # whoever waits, waits long
    manager, agent, model = await attached(
        tmp_path, max_input_tokens=8_000, tool_result={"mask_after": None, "recent_max_share": None}
    )
    agent.set_console_output_enabled(False)
    await run_one(agent, model, 0, 3_000, "first")  # the index exists
    with holding(tmp_path, "write"):
        for n in (1, 2, 3):  # outputs cut and saved, then compaction appends to dialog/
            reply = asyncio.ensure_future(run_one(agent, model, n, 3_000, f"n{n}"))
            done, _ = await asyncio.wait({reply}, timeout=HANG_SECONDS)
            if not done:
                reply.cancel()
            assert done, "the reply waited for the process holding the index"
    found = await ask(agent, model, tool_call("search_history", "s", query=fact(7)[1]), "s")
    assert fact(7)[2] in found and "saved output of run_report(n=2, lines=3000)" in found, found
    await manager.close()


@pytest.mark.parametrize(
    ("arguments", "error"),
    [
        ({"role": "robot"}, "role must be one of"),
        ({"since": "yesterday"}, "since must look like"),
        ({"until": "2026-13-45 99"}, "until must look like"),
        ({"limit": "many"}, "limit must be a number"),
    ],
)
async def test_bad_arguments_get_an_error_text(
    tmp_path: Path, arguments: dict[str, Any], error: str
) -> None:
    manager, agent, model = await attached(tmp_path)
    found = await ask(agent, model, tool_call("search_history", "e", query="x", **arguments), "e")
    assert found.startswith("Error: ") and error in found
    await manager.close()


async def test_an_answer_stays_small_enough_never_to_be_cut(tmp_path: Path) -> None:
    manager, agent, model = await attached(  # memory files: the agent scope (docs/tenants.md)
        tmp_path, tool_result={"old_max_bytes": 1_500, "recent_n": 1}, recall={"scope": "agent"}
    )
    (tmp_path / "memory").mkdir()
    (tmp_path / "memory" / "notes.md").write_text(
        "".join(f"- ocelot note {i} " + "wide " * 80 + "\n" for i in range(200)),
        encoding="utf-8",
    )
    found = await ask(agent, model, tool_call("search_history", "w", query="ocelot", limit=20), "w")
    assert len(found.encode("utf-8")) <= 1_500
    assert "more hits not shown" in found and "TRUNCATED" not in found
    for n in range(3):  # the answer slides out of the newest recent_n: still whole
        await run_one(agent, model, n, 10, "more")
    kept = [
        b
        for m in manager.memory_of(agent).messages()
        for b in m.get_content_blocks("tool_result")
        if b.get("id") == "w"
    ]
    assert kept and kept[0]["output"][0]["text"] == found  # type: ignore[index]
    await manager.close()


async def test_recall_can_be_turned_off(tmp_path: Path) -> None:
    manager, agent, model = await attached(tmp_path, recall={"enabled": False})
    await run_one(agent, model, 1, 3_000, "run it")
    assert "search_history" not in agent.toolkit.tools
    assert not (tmp_path / "index").exists()
    await manager.close()


# -- the command ----------------------------------------------------------------------------


def _as_the_cli_says(answer: str) -> str:
    """A `search_history` answer of agent "operator" as `agentscope-ctx search --agent
    operator` says it (issue 31: a person cannot run a `read_file` call)."""

    def command(match: re.Match[str]) -> str:
        at = Position(int(match[2]), int(match[3] or 0))
        return "read on: " + read_command(match[1], at)

    answer = answer.replace("in your history", "in the history of agent 'operator'", 1)
    pointer = r"read on: read_file file_path=(\S+) start_line=(\d+)(?: line_offset=(\d+))?"
    return re.sub(pointer, command, answer)


async def test_the_search_command_shows_what_the_tool_shows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manager, agent, model = await attached(
        tmp_path,
        max_input_tokens=8_000,
        # the user turns leave the context by compaction (masking alone would keep them)
        tool_result={"mask_after": None, "recent_max_share": None},
    )
    for n in range(3):
        await run_one(agent, model, n, 3_000, f"note {fact(40 + n)[0]}")
    for k in (1, 41):
        found = await ask(
            agent, model, tool_call("search_history", f"c{k}", query=fact(k)[1]), f"c{k}"
        )
        capsys.readouterr()
        assert cli_main(["search", str(tmp_path), fact(k)[1], "--agent", "operator"]) == 0
        # the same hits; the CLI names whose history, and reads on with a shell command
        assert capsys.readouterr().out.strip() == _as_the_cli_says(found).strip()
        assert fact(k)[2] in found
    assert cli_main(["search", "--role", "user", str(tmp_path), fact(41)[1]]) == 0
    out = capsys.readouterr().out
    assert "in all agents' history" in out and "· agent operator" in out and fact(41)[2] in out
    await manager.close()


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--role", "robot"], "--role must be one of"),
        (["--since", "soon"], "--since must look like"),
        (["--limit", "0"], "--limit must be from 1"),
    ],
)
def test_the_search_command_reports_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], options: list[str], message: str
) -> None:
    (tmp_path / "dialog").mkdir()
    assert cli_main(["search", *options, str(tmp_path), "x"]) == 2
    lines = capsys.readouterr().err.strip().splitlines()  # a usage error, as every command's
    assert lines[0].startswith("usage: agentscope-ctx search ")
    assert lines[-1].startswith("agentscope-ctx search: error: ") and message in lines[-1]


def test_the_search_command_needs_a_working_dir(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = tmp_path / "config.yaml"
    config.write_text(f"working_dir: {tmp_path / 'nowhere'}\n", encoding="utf-8")
    assert cli_main(["search", "--config", str(config), "some words"]) == 1
    assert "does not exist" in capsys.readouterr().err


# -- the eviction index ---------------------------------------------------------------------


def turn(minute: int, day: int = 2) -> list[Msg]:
    """One user turn with a tool call, at 2026-12-`day` 10:`minute`."""
    msgs = [
        Msg(
            "user", f"Please check the failing build number {minute} and fix the flaky test", "user"
        ),
        Msg(
            "operator",
            [
                {
                    "type": "tool_use",
                    "id": f"t{minute}",
                    "name": "run_shell",
                    "input": {"command": "pytest -x tests/test_app.py", "cwd": "/srv/app"},
                }
            ],
            "assistant",
        ),
        Msg(
            "system",
            [{"type": "tool_result", "id": f"t{minute}", "name": "run_shell", "output": "ok"}],
            "system",
        ),
    ]
    for i, m in enumerate(msgs):
        m.timestamp = f"2026-12-{day:02d} 10:{minute + i:02d}:00.000"
    return msgs


def test_eviction_index_lists_time_range_user_turns_and_tools() -> None:
    text, entries = eviction_index(turn(1) + turn(5), (), 1_200)
    assert text.splitlines()[0] == EVICTION_HEADER
    entry = text.splitlines()[1]
    assert entry.startswith("- 2026-12-02 10:01 → 10:07 · 6 messages · user: ")
    assert '"Please check the failing build number 1 and…"' in entry
    assert 'tools: run_shell(command="pytest -x tests/test_app.py", cwd="/srv/app") ×2' in entry
    assert eviction_index(turn(1) + turn(5), (), 1_200) == (text, entries)  # deterministic


def test_eviction_index_stays_bounded_and_folds_the_oldest() -> None:
    text, entries = "", []
    for k in range(30):
        text, entries = eviction_index(turn(k % 50, day=1 + k // 10), entries, 600)
        assert len(text) <= 600
    lines = text.splitlines()
    assert lines[1].startswith("- earlier: 2026-12-01 10:00 → ")
    assert "messages" in lines[1] and "user:" not in lines[1]
    total = sum(int(line.split(" · ")[1].split()[0]) for line in lines[1:])
    assert total == 30 * 3  # every compacted message is still counted
    assert lines[-1].startswith("- 2026-12-03 10:29 → 10:31 · 3 messages · user: ")


def test_eviction_index_keeps_the_previous_entries_without_new_times() -> None:
    before = eviction_index(turn(1), (), 800)
    undated = Msg("user", "no time", "user")
    undated.timestamp = None
    assert eviction_index([undated], before[1], 800) == before
    assert eviction_index([], (), 800) == ("", [])
    assert len(eviction_index(turn(1), before[1], 200)[0]) <= 200
