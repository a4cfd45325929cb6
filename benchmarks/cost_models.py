"""The scripted models of the cost benchmark (`bench_cost`).

`AgentScript` is the agent's model: it answers from the script by call number and hands each
prompt to a `PromptMeter`. `HelperModel` is the context manager's own model (or the built-in
compression's): it answers compactor, Summarizer and structured-summary calls from the prompt
alone, and meters each kind separately.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from agentscope.message import TextBlock, ToolUseBlock
from agentscope.model import ChatModelBase, ChatResponse

from benchmarks.cost_meter import PromptMeter
from benchmarks.cost_session import Step


class AgentScript(ChatModelBase):
    """The agent's model: one tool call per step of the script, then the turn's answer."""

    def __init__(self, plan: list[list[Step]], meter: PromptMeter) -> None:
        super().__init__(model_name="scripted-agent", stream=False)
        self.meter = meter
        self.probe: Callable[[], None] | None = None
        """Called before each answer (the benchmark counts compactions with it)."""
        self._answers: list[ChatResponse] = []
        for turn, steps in enumerate(plan):
            for step in steps:
                name = Path(step.file_path).name
                args = {"file_path": step.file_path}
                self._answers.append(
                    ChatResponse(
                        content=[
                            TextBlock(type="text", text=f"Next I read {name}."),
                            ToolUseBlock(
                                type="tool_use",
                                id=step.call_id,
                                name="view_text_file",
                                input=args,
                                raw_input=json.dumps(args),
                            ),
                        ]
                    )
                )
            names = ", ".join(Path(step.file_path).name for step in steps)
            answer = f"Task {turn + 1} done. I reviewed {len(steps)} files ({names})."
            self._answers.append(ChatResponse(content=[TextBlock(type="text", text=answer)]))
        self._next = 0

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        structured_model: Any = None,
        **kwargs: Any,
    ) -> ChatResponse:
        if self.probe is not None:
            self.probe()
        await self.meter.measure(messages, tools)
        if self._next >= len(self._answers):
            return ChatResponse(content=[TextBlock(type="text", text="Nothing more to do.")])
        self._next += 1
        return self._answers[self._next - 1]


_PATH_RE = re.compile(r"/[\w./-]+/(?:module|notes)_\d{3}\.(?:py|txt)")
_TASK_RE = re.compile(r"Task \d+: review these files for [\w ]+")
_DAY_RE = re.compile(r"(\d{4}-\d{2}-\d{2})\.md")


class HelperModel(ChatModelBase):
    """The manager's own model: compactor calls (no tools), Summarizer calls (memory-file
    tools) and the built-in compression's structured calls, each metered on its own."""

    def __init__(self, make_meter: Callable[[], PromptMeter]) -> None:
        super().__init__(model_name="scripted-helper", stream=False)
        self.meters = {kind: make_meter() for kind in ("compactor", "summarizer", "compression")}
        self.last_summary = ""
        """The last summary it wrote as the compactor."""
        self._ids = 0

    async def __call__(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        tool_choice: str | None = None,
        structured_model: Any = None,
        **kwargs: Any,
    ) -> ChatResponse:
        names = {str(t.get("function", {}).get("name")) for t in tools or []}
        kind = (
            "compression"
            if structured_model is not None
            else "summarizer"
            if any(n.endswith("memory_file") for n in names)
            else "compactor"
        )
        await self.meters[kind].measure(messages, tools)
        text = json.dumps(messages, ensure_ascii=False)
        paths = list(dict.fromkeys(_PATH_RE.findall(text)))[-40:]
        tasks = _TASK_RE.findall(text)
        goal = tasks[-1] if tasks else "Review the repository files."
        if kind == "compression":
            fields = {name: f"- {goal}" for name in structured_model.model_fields}
            fields["current_state"] = "\n".join(f"- viewed `{p}`" for p in paths)
            return ChatResponse(content=[TextBlock(type="text", text="")], metadata=fields)
        if kind == "compactor":
            self.last_summary = _summary(goal, paths)
            return ChatResponse(content=[TextBlock(type="text", text=self.last_summary)])
        return self._summarizer_step(messages, text)

    def _summarizer_step(self, messages: list[dict[str, Any]], text: str) -> ChatResponse:
        """Read today's notes, append one lesson, then say so (stateless: by tool results)."""
        done = sum(1 for m in messages if m.get("role") == "tool")
        days = _DAY_RE.findall(text)
        day = days[0] if days else "notes"
        if done >= 2:
            return ChatResponse(content=[TextBlock(type="text", text="Recorded one lesson.")])
        self._ids += 1
        name, args = (
            ("read_memory_file", {"file_path": f"{day}.md"})
            if done == 0
            else (
                "write_memory_file",
                {
                    "file_path": f"{day}.md",
                    "content": (
                        "- Lesson: view_text_file output of large files is cut; continue with "
                        "read_file at the start_line its notice gives."
                    ),
                },
            )
        )
        block = ToolUseBlock(
            type="tool_use",
            id=f"helper-{self._ids}",
            name=name,
            input=args,
            raw_input=json.dumps(args),
        )
        return ChatResponse(content=[block])


def _summary(goal: str, paths: Sequence[str]) -> str:
    """A five-section summary naming the files viewed so far."""
    done = "\n".join(f"- Viewed `{p}`." for p in paths) or "- (none)"
    return (
        f"## Goal\n- {goal}\n## Constraints\n- Keep exact file paths and error messages.\n"
        f"## Progress\n### Done\n{done}\n### In progress\n- Reviewing the next files.\n"
        "### Blocked\n- (none)\n## Key Decisions\n- Large outputs are read on with read_file.\n"
        "## Next Steps\n- Continue with the remaining files of the task.\n"
        "## Critical Context\n- (none)\n"
    )
