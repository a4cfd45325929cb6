"""The harness every demo shares: a real agent with real tools, the scripted model, the
context manager attached, and the report at the end.

Only the agent differs between the AgentScope lines, so a line is a small adapter: a
`start_session` function that builds the agent, its model (the scripted one, or a real one
wrapped to record what the provider says) and the context manager, and answers the demo's
questions (`DemoSession`). 1.x: `agentscope_ctx.demo._line1` (a `ReActAgent`); 2.x:
`agentscope_ctx._v2._demo` (a 2.x `Agent`). The plan, the tools, the files and the report
are the same on both.
"""

from __future__ import annotations

import asyncio
import importlib
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .._line import IS_1X
from .._providers import Models
from ..core._private import write_atomic
from ..core.config._config import ContextConfig
from ..core.tokens._tokens import TokenCounter
from ..stores._dialog import DialogStore
from ..stores._usage_file import read_usage
from ..viewer import SessionView, write_page
from ..viewer._figures import session_figures
from ._chart import render_chart
from ._notices import Notices
from ._report import DemoReport
from ._rungs import collect_rungs, first_cuts
from ._scripted import PromptStats, Step

__all__ = [
    "DEFAULT_CONTEXT",
    "DemoRun",
    "DemoSession",
    "DemoSetup",
    "Notices",
    "model_note",
    "run_setup",
]

logger = logging.getLogger("agentscope_ctx")

DEFAULT_CONTEXT: dict[str, Any] = {
    "max_input_tokens": 8_000,
    "compact_trigger_ratio": 0.75,
    "keep_recent_ratio": 0.3,
    "tool_result": {
        "recent_n": 3,
        "recent_max_bytes": 8_192,
        "old_max_bytes": 1_536,
        "markdown_recent_max_bytes": 16_384,
        "markdown_old_max_bytes": 4_096,
    },
    "summarizer": {"enabled": False},
}
"""Context settings of the demos (each may override some): a small budget, the window of a
small local model, so that a short session walks up the whole ladder."""

SCRIPTED_NOTE = (
    "NOTE: the model in this demo is SCRIPTED (offline, no LLM, no API key): it replays a plan "
    "of tool calls and reacts to the tool results it sees; the compactor's model is scripted too "
    "(it writes the summary from the transcript it is sent). The agent, tools, files, "
    "truncation, dialog/, compaction and search are all real."
)


@dataclass
class DemoSetup:
    """What a demo module prepares in the working directory."""

    title: str
    sys_prompt: str
    tools: list[Callable[..., Any]]
    prompts: list[str]
    """One user message per turn."""
    turns: list[list[Step]]
    """The scripted model's plan, one list of steps per turn."""
    context: dict[str, Any] = field(default_factory=dict)
    """Overrides of `DEFAULT_CONTEXT` for this demo."""
    cleanup: Callable[[], Awaitable[None]] | None = None


class DemoSession(Protocol):
    """A demo's agent on one AgentScope line, ready for the demo's questions."""

    async def ask(self, prompt: str) -> str:
        """One user turn: the agent's final answer (its notices go to the `Notices`)."""
        ...

    async def close(self) -> None:
        """Stop the context manager (and whatever the session started)."""
        ...


@dataclass
class DemoRun:
    """What a line adapter's `start_session` builds the demo's agent from."""

    name: str
    setup: DemoSetup
    cfg: ContextConfig
    stats: PromptStats
    """Records the prompts of the model the adapter builds."""
    models: Models | None
    """The real models, or `None`: the scripted ones."""
    notices: Notices
    """Takes the context manager's notices (`notices.note`)."""
    out: Callable[[str], None]


StartSession = Callable[[DemoRun], Awaitable[DemoSession]]
"""`start_session(run)` of a line adapter."""


def model_note(models: Models | None) -> str:
    """The line a demo starts with: which model answers."""
    if models is None:
        return SCRIPTED_NOTE
    model = models.model
    # the model's name: `model_name` on AgentScope 1.x, `model` on 2.x
    model_name = getattr(model, "model_name", None) or getattr(model, "model", "")
    return (
        f"NOTE: the model in this demo is REAL: {type(model).__name__} "
        f"{model_name!r}; its answers are its own."
    )


def _merge(base: dict[str, Any], extra: dict[str, Any]) -> dict[str, Any]:
    merged = dict(base)
    for key, value in extra.items():
        if isinstance(value, dict) and isinstance(merged.get(key), dict):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = value
    return merged


def demo_config(
    working_dir: Path, overrides: dict[str, Any], user: ContextConfig | None
) -> ContextConfig:
    """The demo's `ContextConfig`: the user's (if given) or the demo defaults, always with
    `working_dir` (and `read_roots`) set to the demo directory."""
    if user is not None:
        return user.model_copy(update={"working_dir": working_dir, "read_roots": [working_dir]})
    fields = _merge(DEFAULT_CONTEXT, overrides)
    return ContextConfig(**fields, working_dir=working_dir, read_roots=[working_dir])


def _viewer_page(cfg: ContextConfig, working_dir: Path) -> SessionView | None:
    """Write the run's session viewer page (`agentscope-ctx view`) and return what it shows;
    `None` when it cannot be written (logged: the demo's report stands without it)."""
    try:
        return write_page(cfg, working_dir / "view.html")
    except Exception:
        logger.exception("agentscope_ctx: could not write the demo's viewer page")
        return None


def _context_now(working_dir: Path, agent: str) -> int | None:
    """The manager's estimate of the agent's context at its last reply (its usage record)."""
    for record in read_usage(working_dir):
        if record.get("agent") == agent and isinstance(record.get("prompt_tokens"), int):
            tokens: int = record["prompt_tokens"]
            return tokens
    return None


def _tree_size(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()] if path.exists() else []
    return len(files), sum(p.stat().st_size for p in files)


def _start_session() -> StartSession:
    """The installed line's `start_session` (imported by name: each line's type check sees
    only its own adapter)."""
    name = "agentscope_ctx.demo._line1" if IS_1X else "agentscope_ctx.demo._line2"
    start: StartSession = importlib.import_module(name).start_session
    return start


async def run_setup(
    name: str,
    setup: DemoSetup,
    working_dir: Path,
    *,
    config: ContextConfig | None = None,
    models: Models | None = None,
    out: Callable[[str], None] = print,
) -> DemoReport:
    """Run a prepared demo and return its report (the chart is written to the directory).

    With `models`, the demo runs on that real model (and its compactor model) instead of
    the scripted one."""
    cfg = demo_config(working_dir, setup.context, config)
    stats = PromptStats(TokenCounter(cfg.token_counter), root=working_dir)
    notices = Notices(stats, out, working_dir)
    session = await _start_session()(DemoRun(name, setup, cfg, stats, models, notices, out))
    answers: list[str] = []
    try:
        for prompt in setup.prompts:
            out(f"\nuser> {prompt}")
            text = await session.ask(prompt)
            answers.append(text)
            out(f"\n{agent_name(name)}> {text}\n")
    finally:
        await session.close()
        if setup.cleanup is not None:
            await setup.cleanup()
    report = await asyncio.to_thread(_report, name, working_dir, cfg, stats, notices, answers)
    return report


def agent_name(demo: str) -> str:
    """The demo agent's name."""
    return "detective" if demo == "logs" else demo


def _report(
    name: str,
    working_dir: Path,
    cfg: ContextConfig,
    stats: PromptStats,
    notices: Notices,
    answers: list[str],
) -> DemoReport:
    # the session's counts the viewer's page shows too, from one source (`session_figures`:
    # the store's records); read from the files when the page could not be written
    view = _viewer_page(cfg, working_dir)
    agent = agent_name(name)
    if view is not None:
        figures = session_figures(view)
        dialog, offloaded = figures.dialog_messages, figures.saved_outputs
        offloaded_bytes, context_now = figures.saved_bytes, figures.context.get(agent)
    else:
        dialog = len(DialogStore(cfg.working_dir).read()[0])
        offloaded, offloaded_bytes = _tree_size(working_dir / "tool_result")
        context_now = _context_now(working_dir, agent)
    report = DemoReport(
        name=name,
        working_dir=working_dir,
        budget=cfg.max_input_tokens,
        threshold=int(cfg.trigger_ratio(cfg.max_input_tokens) * cfg.max_input_tokens),
        prompt_tokens=list(stats.prompt_tokens),
        provider_tokens=list(stats.provider_tokens),
        provider_cached=list(stats.provider_cached),
        rejected=dict(stats.rejected),
        retries=list(stats.retries),
        compaction_steps=list(notices.steps),
        relief_steps=list(notices.reliefs),
        continuation_reads=stats.continuation_reads,
        first_truncations=stats.first_truncations,
        second_truncations=stats.second_truncations,
        bytes_offloaded=offloaded_bytes,
        offloaded_files=offloaded,
        dialog_messages=dialog,
        answer=answers[-1] if answers else "",
        answers=list(answers),
        rungs=collect_rungs(stats, notices, working_dir),
        first_cuts=first_cuts(stats, working_dir),
        counter=stats.counter_name,
        context_now=context_now,
    )
    chart = working_dir / "report.svg"
    write_atomic(chart, render_chart(report))
    report.chart = chart
    report.viewer = None if view is None else working_dir / "view.html"
    report.text_file = working_dir / "report.txt"  # written last, and counted
    report.files_written = _tree_size(working_dir)[0] + (not report.text_file.exists())
    write_atomic(report.text_file, report.render() + "\n")
    return report
