"""A scripted agent session that can be killed at any point and resumed (tests/agentscope1/test_crash.py).

    python -m tests.support.crash_session WORKING_DIR [--turns N] [--steps N] [--agents N]

A real `ReActAgent` with `ContextManager` attached (a small `max_input_tokens`, so compaction
happens every few steps; large tool outputs, so truncation happens at every step) replays a
scripted `FakeChatModel`. After every reply the state of the agent (and of a small `Progress`
module: the next turn, how many ids were logged) is saved with an AgentScope `JSONSession`.
At start the saved state is loaded, if any (agent created, manager attached, then
`load_session_state`), and the session goes on from the next turn.

Write-ahead id log: `WORKING_DIR/ids.log` gets the id of every message (one per line, fsync-ed)
BEFORE the message is added to the memory, so the test knows every message that ever existed.

With `--agents N` the script runs N agents concurrently (asyncio tasks, each with its own
`ContextManager`) on one working_dir; each has its own id log and session id
(`{prefix}crash{i}`), so several processes can share the working_dir too.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

from agentscope.agent import ReActAgent
from agentscope.message import Msg, TextBlock
from agentscope.module import StateModule
from agentscope.tool import Toolkit, ToolResponse

from agentscope_ctx import AtomicJSONSession, ContextConfig, ContextManager
from agentscope_ctx.core.tokens._tokens import TokenCounter
from tests.support.fakes import FakeChatModel, text, tool_call
from tests.support.react1 import react

BUDGET = 8_000
SESSION_ID = "crash"
DONE_TEXT = "turn {turn} done"


def make_config(working_dir: Path) -> ContextConfig:
    return ContextConfig(
        working_dir=working_dir,
        max_input_tokens=BUDGET,
        compact_trigger_ratio=0.7,
        keep_recent_ratio=0.3,
        # The subject is the write-ahead compaction path: no masking, so that it compacts.
        tool_result={
            "recent_n": 2,
            "recent_max_bytes": 4_000,
            "old_max_bytes": 1_500,
            "mask_after": None,
        },
        token_counter="cl100k_base",
        summarizer={"enabled": False},
        consolidation={"enabled": False},
    )


def fetch_page(url: str) -> ToolResponse:
    """Fetch a web page.

    Args:
        url (str): the address.
    """
    n = url.rsplit("/", 1)[-1]
    body = "".join(f"<p id='{n}-{i}'>paragraph {i} of page {n} 中文 😀</p>\n" for i in range(300))
    return ToolResponse(content=[TextBlock(type="text", text=f"<html>{body}</html>")])


def run_shell(command: str) -> ToolResponse:
    """Run a shell command.

    Args:
        command (str): the command line.
    """
    lines = "".join(f"{command}: line {i} INFO ok\r\n" for i in range(250))
    return ToolResponse(content=[TextBlock(type="text", text=lines)])


TOOLS = {"fetch_page": fetch_page, "run_shell": run_shell}
"""The scripted tools, by name: a test recomputes the full output of any call from its input."""


def make_toolkit() -> Toolkit:
    toolkit = Toolkit()
    for func in TOOLS.values():
        toolkit.register_tool_function(func)
    return toolkit


class Progress(StateModule):
    """Where the scripted session is; saved in the same session file as the agent."""

    def __init__(self) -> None:
        super().__init__()
        self.turn = 0
        """The next turn to run."""
        self.ids_logged = 0
        """Lines of the id log when the state was saved (all of them were added before)."""
        self.register_state("turn")
        self.register_state("ids_logged")


def make_agent(model: FakeChatModel, name: str = "worker") -> ReActAgent:
    return react(  # type: ignore[no-any-return]
        model, make_toolkit(), name=name, sys_prompt="You are a careful assistant.", max_iters=50
    )


def read_id_log(path: Path) -> list[str]:
    """The complete lines of an id log (a torn last line, without its newline, is left out)."""
    if not path.exists():
        return []
    data = path.read_text(encoding="utf-8")
    lines = data.split("\n")
    return lines[:-1]  # the last item is "" or a torn fragment


def id_log_path(working_dir: Path, session_id: str = SESSION_ID) -> Path:
    """`ids.log` for the single-agent session, `ids-{session_id}.log` otherwise."""
    return working_dir / ("ids.log" if session_id == SESSION_ID else f"ids-{session_id}.log")


class IdLog:
    """Append-only, fsync-ed log of message ids."""

    def __init__(self, path: Path) -> None:
        self.path = path
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        size = os.fstat(fd).st_size
        if size:
            with open(path, "rb") as file:
                file.seek(size - 1)
                if file.read(1) != b"\n":  # a torn line from a kill: end it
                    os.write(fd, b"\n")
                    os.fsync(fd)
        self.fd = fd
        self.count = len(read_id_log(path))
        self.seen: set[str] = set(read_id_log(path))

    def log(self, msg_id: str) -> None:
        if msg_id in self.seen:
            return
        os.write(self.fd, f"{msg_id}\n".encode())
        os.fsync(self.fd)
        self.seen.add(msg_id)
        self.count += 1


def spy_on_add(memory: Any, note: Callable[[str], object]) -> None:
    """`note` every message id before it enters `memory` (a 1.x memory)."""
    original_add = memory.add

    async def spy_add(memories: Any, *args: Any, **kwargs: Any) -> None:
        for msg in [memories] if isinstance(memories, Msg) else memories or []:
            note(msg.id)
        await original_add(memories, *args, **kwargs)

    memory.add = spy_add


def script_turn(model: FakeChatModel, turn: int, steps: int, tag: str = "") -> None:
    for k in range(steps):
        step = turn * steps + k
        if step % 2 == 0:
            model.enqueue(
                tool_call("fetch_page", call_id=f"c{tag}{step}", url=f"http://x/{tag}{step}")
            )
        else:
            model.enqueue(tool_call("run_shell", call_id=f"c{tag}{step}", command=f"ls {step}"))
    model.enqueue(text(DONE_TEXT.format(turn=turn)))


async def restore(
    working_dir: Path,
    session_id: str = SESSION_ID,
    *,
    counter: TokenCounter | None = None,
    model: FakeChatModel | None = None,
) -> tuple[ReActAgent, ContextManager, Progress]:
    """A fresh agent with the manager attached and the saved state (if any) loaded."""
    agent = make_agent(model or FakeChatModel())
    manager = ContextManager(
        make_config(working_dir), token_counter=counter or TokenCounter("cl100k_base")
    )
    manager.attach(agent)
    progress = Progress()
    session = AtomicJSONSession(save_dir=str(working_dir / "sessions"))
    await session.load_session_state(session_id, agent=agent, progress=progress)
    return agent, manager, progress


async def run_one(
    working_dir: Path, session_id: str, turns: int, steps: int, counter: TokenCounter
) -> None:
    model = FakeChatModel()
    agent, manager, progress = await restore(working_dir, session_id, counter=counter, model=model)
    id_log = IdLog(id_log_path(working_dir, session_id))
    spy_on_add(agent.memory, id_log.log)
    session = AtomicJSONSession(save_dir=str(working_dir / "sessions"))
    for turn in range(progress.turn, turns):
        script_turn(model, turn, steps, tag=session_id)
        reply = await agent(Msg("user", f"task {turn}: look around", "user"))
        if reply.get_text_content() != DONE_TEXT.format(turn=turn):
            raise AssertionError(f"unexpected reply: {reply.get_text_content()!r}")
        progress.turn = turn + 1
        progress.ids_logged = id_log.count
        await session.save_session_state(session_id, agent=agent, progress=progress)
        print(f"SAVED {turn}", flush=True)  # a point a test may kill after, deterministically
    await manager.close()


async def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("working_dir", type=Path)
    parser.add_argument("--turns", type=int, default=6)
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--agents", type=int, default=1)
    parser.add_argument("--prefix", default="", help="session ids: {prefix}crash{i}")
    args = parser.parse_args(argv)
    working_dir: Path = args.working_dir
    working_dir.mkdir(parents=True, exist_ok=True)
    counter = TokenCounter("cl100k_base")
    await counter.count_text("warm up")  # load the encoding before READY
    print("READY", flush=True)
    ids = (
        [SESSION_ID]
        if args.agents == 1 and not args.prefix
        else [f"{args.prefix}{SESSION_ID}{i}" for i in range(args.agents)]
    )
    await asyncio.gather(
        *(run_one(working_dir, sid, args.turns, args.steps, counter) for sid in ids)
    )
    print("DONE", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main(sys.argv[1:])))
