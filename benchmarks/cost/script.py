"""What the scripted models of the cost benchmark answer, on either AgentScope line.

The answers are plain data here; `cost.models1` (1.x) and `cost.models2` (2.x) wrap them in
each line's response types:

- the agent's model: per turn, one tool call per step (`view_text_file` on the step's file,
  with a short text), then the turn's answer (`agent_answers`);
- the helpers' model (the context manager's compactor and Summarizer, or the built-in
  compression): its kind from the call's tools (`helper_kind`), a five-section summary naming
  the files seen (`summary`), the built-in's structured summary (`structured_summary`), and the
  Summarizer's three steps (`summarizer_step`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks.cost.session import Step

TOOL = "view_text_file"

_PATH_RE = re.compile(r"/[\w./-]+/(?:module|notes|records)_\d{3}\.(?:py|txt|json)")
_TASK_RE = re.compile(r"Task \d+: review these files for [\w ]+")
_DAY_RE = re.compile(r"(\d{4}-\d{2}-\d{2})\.md")


@dataclass(frozen=True)
class Answer:
    """One scripted answer: a text, and a tool call when `step` is set."""

    text: str
    step: Step | None = None

    @property
    def arguments(self) -> dict[str, Any]:
        return {} if self.step is None else {"file_path": self.step.file_path}


def agent_answers(plan: Sequence[Sequence[Step]]) -> list[list[Answer]]:
    """The agent's answers, turn by turn: a tool call per step, then the turn's answer."""
    turns = []
    for turn, steps in enumerate(plan):
        answers = [Answer(f"Next I read {Path(s.file_path).name}.", s) for s in steps]
        names = ", ".join(Path(step.file_path).name for step in steps)
        answers.append(Answer(f"Task {turn + 1} done. I reviewed {len(steps)} files ({names})."))
        turns.append(answers)
    return turns


def helper_kind(tool_names: Iterable[str], structured: bool) -> str:
    """``compression`` (the built-in's structured call), ``summarizer`` (memory-file tools) or
    ``compactor`` (no tools)."""
    names = set(tool_names)
    if structured or "generate_structured_output" in names:
        return "compression"
    return "summarizer" if any(n.endswith("memory_file") for n in names) else "compactor"


def goal_and_paths(text: str) -> tuple[str, list[str]]:
    """The last user task and the (last 40) file paths named in a prompt's text."""
    paths = list(dict.fromkeys(_PATH_RE.findall(text)))[-40:]
    tasks = _TASK_RE.findall(text)
    return (tasks[-1] if tasks else "Review the repository files."), paths


def summary(goal: str, paths: Sequence[str]) -> str:
    """A five-section summary naming the files viewed so far."""
    done = "\n".join(f"- Viewed `{p}`." for p in paths) or "- (none)"
    return (
        f"## Goal\n- {goal}\n## Constraints\n- Keep exact file paths and error messages.\n"
        f"## Progress\n### Done\n{done}\n### In progress\n- Reviewing the next files.\n"
        "### Blocked\n- (none)\n## Key Decisions\n- Large outputs are read on with read_file.\n"
        "## Next Steps\n- Continue with the remaining files of the task.\n"
        "## Critical Context\n- (none)\n"
    )


def structured_summary(fields: Iterable[str], goal: str, paths: Sequence[str]) -> dict[str, str]:
    """The built-in compression's structured summary: every field, the files in
    ``current_state``."""
    out = {name: f"- {goal}" for name in fields}
    out["current_state"] = "\n".join(f"- viewed `{p}`" for p in paths)
    return out


def summarizer_step(done: int, text: str) -> tuple[str, dict[str, Any]] | None:
    """The Summarizer's next tool call (by how many tool results it has seen): read today's
    notes, append one lesson; then `None` (it answers "Recorded one lesson.")."""
    days = _DAY_RE.findall(text)
    day = days[0] if days else "notes"
    if done >= 2:
        return None
    if done == 0:
        return "read_memory_file", {"file_path": f"{day}.md"}
    lesson = (
        "- Lesson: view_text_file output of large files is cut; continue with "
        "read_file at the start_line its notice gives."
    )
    return "write_memory_file", {"file_path": f"{day}.md", "content": lesson}


def dumps(value: object) -> str:
    """JSON text of a prompt, for the regular expressions above."""
    return json.dumps(value, ensure_ascii=False, default=str)
