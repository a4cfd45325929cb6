"""The whole 2.x adapter in a real AgentScope 2.x `Agent` with a real `Toolkit` and real files
(only the model is scripted): the pressure ladder and compaction on `AgentState`, within the
budget at every model call, nothing lost, every cut output reachable byte for byte."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.event import CustomEvent
from agentscope.message import Msg, TextBlock, ToolResultBlock, UserMsg
from agentscope.model import ChatResponse, ChatUsage
from agentscope.tool import Toolkit

from agentscope_ctx import ContextConfig, ContextManager, TokenCounter
from agentscope_ctx.agentscope2 import NOTICE_EVENT, ContextMiddleware
from agentscope_ctx.agentscope2._entries import to_entries
from agentscope_ctx.core.truncation._truncation import parse_notice
from tests.fleet.session2 import make_toolkit
from tests.support.chain import follow_chain
from tests.support.fakes import NOTED_SUMMARY, FakeChatModel, tool_call

BUDGET = 6_000


def _write_logs(folder: Path, count: int) -> list[Path]:
    folder.mkdir()
    paths = []
    for n in range(count):
        lines = [
            f"2026-12-0{1 + n % 9} 10:{i % 60:02d} worker-{n} job={i} status=ok 用户 {i * n}\n"
            for i in range(400)
        ]
        path = folder / f"log{n}.txt"
        path.write_text("".join(lines), encoding="utf-8")
        paths.append(path)
    return paths


def _toolkit(root: Path) -> Toolkit:
    return make_toolkit(root, "logs")


def _config(tmp_path: Path, **tool_result: Any) -> ContextConfig:
    return ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "ctx"),
            "max_input_tokens": BUDGET,
            "read_roots": [str(tmp_path)],
            "tool_result": {"recent_max_bytes": 6_000, "old_max_bytes": 1_500, **tool_result},
            "summarizer": {"enabled": False},
        }
    )


class _Session:
    """A scripted model reading `paths` one per step, reporting usage like a provider."""

    def __init__(self, paths: list[Path], root: Path, *, stream: bool = False) -> None:
        self.counter = TokenCounter()
        self.sent: list[int] = []
        self.steps = [tool_call("cat", f"c{i}", path=p.name) for i, p in enumerate(paths)]
        self.model = FakeChatModel(
            [self._answer for _ in self.steps],
            default="All logs read: every job is ok.",
            stream=stream,
        )
        self.root = root

    async def _answer(self, messages: list[Msg]) -> ChatResponse:
        formatted = await self.model.formatter.format(messages)
        tokens = await self.counter.count(formatted, self.model.calls[-1]["tools"])
        self.sent.append(tokens)
        step = self.steps[len(self.sent) - 1]
        return ChatResponse(
            content=list(step.content),
            is_last=True,
            usage=ChatUsage(input_tokens=tokens, output_tokens=10, time=0.0),
        )


def _analyst(
    tmp_path: Path,
    config: ContextConfig,
    helper: FakeChatModel,
    files: int = 12,
    *,
    stream: bool = False,
    middlewares: tuple[Any, ...] = (),
) -> tuple[list[Path], _Session, ContextManager, Agent]:
    """An analyst that reads `files` logs written under ``tmp_path/logs``, one per step, its
    context manager (`helper` its compactor's model) last of `middlewares`."""
    root = tmp_path / "logs"
    paths = _write_logs(root, files)
    session = _Session(paths, root, stream=stream)
    manager = ContextManager(config, model=helper)
    agent = Agent(
        name="analyst",
        system_prompt="You read logs.",
        model=session.model,
        toolkit=_toolkit(root),
        middlewares=[*middlewares, manager.middleware()],
    )
    return paths, session, manager, agent


async def _run(
    tmp_path: Path, config: ContextConfig, files: int = 12, *, stream: bool = False
) -> dict[str, Any]:
    helper = FakeChatModel(default=NOTED_SUMMARY)
    paths, session, manager, agent = _analyst(tmp_path, config, helper, files, stream=stream)
    events = []
    async for event in agent.reply_stream(UserMsg(name="user", content="Read every log.")):
        events.append(event)
    await manager.close()
    return {
        "agent": agent,
        "manager": manager,
        "session": session,
        "events": events,
        "paths": paths,
        "helper": helper,
    }


def _outputs(agent: Agent) -> list[str]:
    out = []
    for msg in agent.state.context:
        for block in msg.content:
            if isinstance(block, ToolResultBlock):
                output = block.output
                out.append(
                    output
                    if isinstance(output, str)
                    else "".join(b.text for b in output if isinstance(b, TextBlock))
                )
    return out


@pytest.mark.parametrize("stream", [False, True])
async def test_prompts_stay_within_budget_and_every_output_chains_back(
    tmp_path: Path, stream: bool
) -> None:
    run = await _run(tmp_path, _config(tmp_path), stream=stream)
    agent, session, manager = run["agent"], run["session"], run["manager"]
    assert len(session.sent) == 12
    assert max(session.sent) <= BUDGET, session.sent
    # the files are ~20 KB each, and the agent got to read them all in a 6k budget
    reader = manager.reader

    async def read(path: str, line: int, offset: int) -> str:
        response = await reader.read_file(path, line, offset)
        return "".join(b.text for b in response.content if isinstance(b, TextBlock))

    by_name = {p.name: p.read_text(encoding="utf-8") for p in run["paths"]}
    chained = 0
    for output in _outputs(agent):
        parsed = parse_notice(output)
        if parsed is None:
            continue
        whole = await follow_chain(output, read)
        assert whole in by_name.values()
        chained += 1
    assert chained > 0
    # the provider's usage reached the calibration (from the stream's last chunk too)
    assert manager.bind(agent).pipeline.cache.last is not None
    # AgentScope's own compression never ran: the helper model was never asked for a
    # structured summary, and the agent's state summary is ours or empty
    assert all(call["tool_choice"] is None for call in run["helper"].calls)


async def test_compaction_on_agent_state_loses_nothing(tmp_path: Path) -> None:
    config = _config(tmp_path, mask_after=None, recent_max_share=None)
    run = await _run(tmp_path, config)
    agent, session, manager = run["agent"], run["session"], run["manager"]
    assert max(session.sent) <= BUDGET, session.sent
    notices = [
        e.value["text"]
        for e in run["events"]
        if isinstance(e, CustomEvent) and e.name == NOTICE_EVENT
    ]
    assert any("compacted" in text for text in notices), notices
    assert "## Goal" in str(agent.state.summary)
    assert agent.state.middle_context["agentscope_ctx"]["summary"].startswith("## Goal")
    # nothing lost: every entry the model was ever sent is in the state or in dialog/
    seen: set[str] = set()
    for call in session.model.calls:
        for msg in call["messages"][1:]:
            if msg.name == "user" and msg.role == "user" and "compact_summary" in str(msg.content):
                continue
            seen.update(entry.id for entry, _ in to_entries(msg))
    kept = {entry.id for msg in agent.state.context for entry, _ in to_entries(msg)}
    saved = manager.dialog.ids()
    assert seen <= kept | saved
    assert saved, "compaction moved messages to dialog/"
    # the live reply kept its id: the agent's final answer is one message
    assert agent.state.context[-1].role == "assistant"


async def test_attach_to_an_existing_agent_and_detect_the_line(tmp_path: Path) -> None:
    manager = ContextManager(_config(tmp_path))
    agent = Agent(name="a", system_prompt="s", model=FakeChatModel(), toolkit=Toolkit())
    middleware = manager.attach(agent)
    assert isinstance(middleware, ContextMiddleware)
    assert manager.attach(agent) is middleware
    assert agent._reasoning_middlewares.count(middleware) == 1
    await agent.reply(UserMsg(name="user", content="hi"))
    usage = await manager.context_usage(agent)
    assert usage.message_count >= 2 and usage.total <= BUDGET
    with pytest.raises(Exception, match="needs an AgentScope"):
        manager.attach(object())  # type: ignore[arg-type]
    manager.detach(agent)
    assert middleware not in agent._reasoning_middlewares


async def test_unwritable_working_dir_the_agent_goes_on_within_budget(tmp_path: Path) -> None:
    """`tool_result` and `dialog` are regular files (every write below them fails, even as
    root): outputs stay whole in the state, the model is shown cut views, the compacted
    messages stay (hidden) until they can be saved; every prompt within budget."""
    working_dir = tmp_path / "ctx"
    working_dir.mkdir()
    (working_dir / "tool_result").write_text("not a directory\n")
    (working_dir / "dialog").write_text("not a directory either\n")
    run = await _run(tmp_path, _config(tmp_path, mask_after=None))
    agent, session = run["agent"], run["session"]
    assert len(session.sent) == 12 and max(session.sent) <= BUDGET, session.sent
    whole = {p.read_text(encoding="utf-8") for p in run["paths"]}
    kept = _outputs(agent)
    assert len(kept) == 12 and set(kept) == whole  # nothing cut that was not saved
    shown = [m for m in session.model.calls[-1]["messages"]]
    assert sum(len(str(m.content)) for m in shown) < sum(map(len, whole)) / 4


async def test_search_history_finds_what_left_the_context(tmp_path: Path) -> None:
    config = _config(tmp_path, mask_after=None, recent_max_share=None)
    run = await _run(tmp_path, config)
    agent, manager = run["agent"], run["manager"]
    tool = await agent.toolkit.get_tool("search_history")
    assert tool is not None and await agent.toolkit.get_tool("remember") is not None
    binding = manager.bind(agent)
    assert binding.recall is not None
    response = await binding.recall.search_history("worker-0 job=7")
    found = "".join(b.text for b in response.content if isinstance(b, TextBlock))
    assert "worker-0" in found, found


async def test_half_an_emoji_in_dialog_never_disables_search_history(tmp_path: Path) -> None:
    """A record with a lone surrogate in dialog/ (issue #19, item 7; on 2.x AgentScope's own
    token estimate rejects one in the context, but another writer of the working dir, a 1.x
    agent, stores it): before, every search_history call answered a UTF-8 error."""
    from agentscope_ctx.core._entry import Msg as CoreMsg
    from agentscope_ctx.stores._dialog import DialogStore

    config = _config(tmp_path, mask_after=None, recent_max_share=None)
    run = await _run(tmp_path, config)
    agent, manager = run["agent"], run["manager"]
    half = CoreMsg("analyst", "half an emoji \ud83d: the quokka code is 77", "assistant")
    await DialogStore(config.working_dir, record_fields={"agent": "analyst"}).append([half])
    recall = manager.bind(agent).recall
    assert recall is not None
    for query, shown in (("quokka code", "the quokka code is 77"), ("worker-0 job=7", "job=7")):
        response = await recall.search_history(query)
        found = "".join(b.text for b in response.content if isinstance(b, TextBlock))
        assert shown in found and not found.startswith("Error"), found


async def test_a_reply_never_waits_for_another_process_holding_the_index(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue #19, item 8: a process holding an index write made one reply with one tool call
    take 75 s (each save waited for it)."""
    import asyncio

    import agentscope_ctx.stores._search as search
    import agentscope_ctx.stores._search_txn as search_txn
    from agentscope_ctx.stores._search import SearchIndex
    from tests.stores.test_search import HANG_SECONDS, holding

    monkeypatch.setattr(search_txn, "BUSY_SECONDS", 3_600.0)  # whoever waits, waits long
    # but the manager's close, which waits for the holder a bounded time (5 s) to write the
    # owners it kept, then leaves them to the next search (the one below): the same give-up
    monkeypatch.setattr(search, "CLOSE_WAIT_SECONDS", 0.05)
    config = _config(tmp_path, mask_after=None, recent_max_share=None)
    SearchIndex(config.working_dir).catch_up()  # the index exists
    with holding(config.working_dir, "write"):
        reply = asyncio.ensure_future(_run(tmp_path, config))  # 12 reads, cut, compacted
        done, _ = await asyncio.wait({reply}, timeout=HANG_SECONDS)
        if not done:
            reply.cancel()
        assert done, "the reply waited for the process holding the index"
    run = reply.result()
    recall = run["manager"].bind(run["agent"]).recall
    assert recall is not None
    response = await recall.search_history("worker-0 job=7")
    found = "".join(b.text for b in response.content if isinstance(b, TextBlock))
    assert "worker-0" in found and "job=7" in found, found


async def test_a_saved_state_reloads_into_a_new_process(tmp_path: Path) -> None:
    """AgentState is what 2.x persists: saved as JSON after a compacted session and loaded
    into a new agent with a new manager, it keeps the summary (ours, from middle_context),
    the calibration, and every message; the next reply goes on within budget."""
    config = _config(tmp_path, mask_after=None, recent_max_share=None)
    run = await _run(tmp_path, config)
    saved = run["agent"].state.model_dump_json()
    summary = run["agent"].state.middle_context["agentscope_ctx"]["summary"]
    assert summary and run["agent"].state.middle_context["agentscope_ctx"]["calibration"]

    from agentscope.state import AgentState

    state = AgentState.model_validate_json(saved)
    model = FakeChatModel(default="Still fine.")
    manager = ContextManager(config, model=FakeChatModel(default=NOTED_SUMMARY))
    agent = Agent(
        name="analyst",
        system_prompt="You read logs.",
        model=model,
        toolkit=_toolkit(tmp_path / "logs"),
        middlewares=[manager.middleware()],
        state=state,
    )
    before = {entry.id for msg in state.context for entry, _ in to_entries(msg)}
    reply = await agent.reply(UserMsg(name="user", content="Anything new?"))
    assert reply.get_text_content() == "Still fine."
    memory = manager.memory_of(agent)
    assert memory.compact_summary == summary
    assert memory.calibration  # the factor learnt in the first process
    after = {entry.id for msg in agent.state.context for entry, _ in to_entries(msg)}
    assert before <= after | manager.dialog.ids()
    usage = await manager.context_usage(agent)
    assert usage.calibrated_total <= BUDGET
    await manager.close()


async def test_manual_compress_context_goes_through_our_pipeline(tmp_path: Path) -> None:
    """`agent.compress_context(instructions=...)` (AgentScope's manual compression) compacts
    through agentscope_ctx, the instructions reaching the compactor's prompt; the agent's own
    compression (a structured-output call) never runs."""
    from agentscope.message import HintBlock

    config = _config(tmp_path, mask_after=None, recent_max_share=None)
    helper = FakeChatModel(default=NOTED_SUMMARY)
    manager = ContextManager(config, model=helper)
    agent = Agent(
        name="a",
        system_prompt="s",
        model=FakeChatModel(default="noted: " + "word " * 200),
        toolkit=Toolkit(),
        middlewares=[manager.middleware()],
    )
    for n in range(10):  # long answers: the user's words are carried verbatim (DESIGN §13)
        await agent.reply(UserMsg(name="user", content=f"note {n}"))
    await agent.compress_context(instructions=HintBlock(hint="keep the note numbers"))
    assert manager.dialog.ids(), "the older messages went to dialog/"
    assert "## Goal" in str(agent.state.summary)
    prompts = [str(call["formatted"]) for call in helper.calls]
    assert any("keep the note numbers" in p for p in prompts)
    # no structured output, no forced tool call (the prefix request carries the agent's
    # tools, as the agent's own calls to this model do: see `compactor.request`)
    assert all("response_format" not in call for call in helper.calls)
    assert all(call["tool_choice"] is None for call in helper.calls)
    await manager.close()


async def test_each_notice_is_logged_once(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A compaction's notice goes to the `agentscope_ctx` log once (and once as an event)."""
    import logging

    config = _config(tmp_path, mask_after=None, recent_max_share=None)
    with caplog.at_level(logging.INFO, logger="agentscope_ctx"):
        run = await _run(tmp_path, config)
    logged = [r.getMessage() for r in caplog.records if "compacted" in r.getMessage()]
    events = [
        e.value["text"]
        for e in run["events"]
        if isinstance(e, CustomEvent) and "compacted" in e.value["text"]
    ]
    assert events and logged == events
