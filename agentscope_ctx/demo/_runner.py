"""The harness every demo shares: a real `ReActAgent` with a real `Toolkit`, the scripted
model, the `ContextManager` attached, and the report at the end."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from agentscope.agent import ReActAgent
from agentscope.formatter import FormatterBase, OpenAIChatFormatter
from agentscope.message import Msg
from agentscope.tool import Toolkit

from .._config import ContextConfig
from .._manager import ContextManager
from .._providers import Models
from .._tokens import TokenCounter
from ._chart import render_chart
from ._recording import RecordingModel
from ._report import DemoReport
from ._scripted import PromptStats, ScriptedModel, Step

__all__ = ["DEFAULT_CONTEXT", "DemoSetup", "model_note", "run_setup"]

DEFAULT_CONTEXT: dict[str, Any] = {
    "max_input_tokens": 16_000,
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
"""Context settings of the demos: a small budget, so that compaction happens within a minute."""

SCRIPTED_NOTE = (
    "NOTE: the model in this demo is SCRIPTED (offline, no LLM, no API key): it replays a plan "
    "of tool calls and reacts to the tool results it sees. The agent, tools, files, truncation, "
    "dialog/ and compaction are all real."
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


class _CompactionWatcher(logging.Handler):
    """Notes each "[agentscope_ctx] compacted ..." and "... relieved ..." (the ladder's cheap
    rungs) line the pipeline logs."""

    def __init__(self, stats: PromptStats, out: Callable[[str], None]) -> None:
        super().__init__(logging.INFO)
        self.stats = stats
        self.out = out
        self.steps: list[int] = []
        self.reliefs: list[int] = []

    def emit(self, record: logging.LogRecord) -> None:
        message = record.getMessage()
        if message.startswith("[agentscope_ctx] compacted"):
            self.steps.append(len(self.stats.prompt_tokens))
            self.out(f"  {message}")
        elif message.startswith("[agentscope_ctx] relieved"):
            self.reliefs.append(len(self.stats.prompt_tokens))
            self.out(f"  {message}")


def model_note(models: Models | None) -> str:
    """The line a demo starts with: which model answers."""
    if models is None:
        return SCRIPTED_NOTE
    return (
        f"NOTE: the model in this demo is REAL: {type(models.model).__name__} "
        f"{models.model.model_name!r}; its answers are its own."
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


def _tree_size(path: Path) -> tuple[int, int]:
    files = [p for p in path.rglob("*") if p.is_file()] if path.exists() else []
    return len(files), sum(p.stat().st_size for p in files)


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
    counter = TokenCounter(cfg.token_counter)
    model: ScriptedModel | RecordingModel
    if models is None:
        model = ScriptedModel(setup.turns, counter=counter, on_step=out)
        formatter: FormatterBase = OpenAIChatFormatter()
        manager = ContextManager(cfg, model=None, token_counter=counter)
    else:
        model = RecordingModel(models.model, counter=counter, on_step=out)
        formatter = models.formatter
        manager = ContextManager(
            cfg,
            model=models.compactor_model,
            formatter=models.compactor_formatter,
            token_counter=counter,
        )
    toolkit = Toolkit()
    for tool in setup.tools:
        toolkit.register_tool_function(tool)
    agent = ReActAgent(
        name="detective" if name == "logs" else name,
        sys_prompt=setup.sys_prompt,
        model=model,
        formatter=formatter,
        toolkit=toolkit,
        max_iters=60,
    )
    agent.set_console_output_enabled(False)
    manager.attach(agent)
    logger = logging.getLogger("agentscope_ctx")
    watcher = _CompactionWatcher(model.stats, out)
    old_level = logger.level
    logger.addHandler(watcher)
    if logger.getEffectiveLevel() > logging.INFO:
        logger.setLevel(logging.INFO)
    answers: list[str] = []
    try:
        for prompt in setup.prompts:
            out(f"\nuser> {prompt}")
            if isinstance(model, ScriptedModel):
                model.next_turn()
            reply = await agent(Msg("user", prompt, "user"))
            text = reply.get_text_content() or ""
            answers.append(text)
            out(f"\n{agent.name}> {text}\n")
    finally:
        logger.removeHandler(watcher)
        logger.setLevel(old_level)
        await manager.close()
        if setup.cleanup is not None:
            await setup.cleanup()
    report = await asyncio.to_thread(
        _report,
        name,
        working_dir,
        cfg,
        manager,
        model.stats,
        watcher.steps,
        watcher.reliefs,
        answers,
    )
    return report


def _report(
    name: str,
    working_dir: Path,
    cfg: ContextConfig,
    manager: ContextManager,
    stats: PromptStats,
    compaction_steps: Sequence[int],
    relief_steps: Sequence[int],
    answers: list[str],
) -> DemoReport:
    stored, _ = manager.dialog.read()
    offloaded, offloaded_bytes = _tree_size(working_dir / "tool_result")
    report = DemoReport(
        name=name,
        working_dir=working_dir,
        budget=cfg.max_input_tokens,
        threshold=int(cfg.compact_trigger_ratio * cfg.max_input_tokens),
        prompt_tokens=list(stats.prompt_tokens),
        provider_tokens=list(stats.provider_tokens),
        provider_cached=list(stats.provider_cached),
        rejected=dict(stats.rejected),
        retries=list(stats.retries),
        compaction_steps=list(compaction_steps),
        relief_steps=list(relief_steps),
        continuation_reads=stats.continuation_reads,
        first_truncations=stats.first_truncations,
        second_truncations=stats.second_truncations,
        bytes_offloaded=offloaded_bytes,
        offloaded_files=offloaded,
        dialog_messages=len(stored),
        answer=answers[-1] if answers else "",
    )
    chart = working_dir / "report.svg"
    chart.write_text(render_chart(report), encoding="utf-8")
    report.chart = chart
    report.files_written = _tree_size(working_dir)[0]
    return report
