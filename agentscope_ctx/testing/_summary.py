"""`write_summary`: the scripted model's answer to a context compactor's request, so that
an offline compaction is a *model* compaction.

The context manager's `Compactor` asks its model for a summary under five headings (Goal,
Constraints, Progress, Key Decisions, Next Steps; then Critical Context), from the previous
summary and a transcript of the older messages. The scripted model reads that prompt, as a
model would, and writes the sections from it: the user's requests, the calls made, the
answers given, the error lines and saved outputs seen. Its answer goes through everything a
real model's does (the Compactor's prompt, validation, the size check). The offline demos,
`agentscope_ctx.testing.ScriptedChatModel` and the fleet example's model server answer
compaction requests with it. A prompt that is not a compactor's gets `NOT_A_SUMMARY`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence

from ..core.compaction._compactor_prompts import HEADINGS
from ..core.truncation._truncation import parse_notice

__all__ = [
    "NOT_A_SUMMARY",
    "compactor_request",
    "content_text",
    "is_compactor_prompt",
    "write_summary",
]

NOT_A_SUMMARY = "(the scripted model only writes compaction summaries)"
"""The answer to any other prompt."""

_ENTRY = re.compile(r"^\[(user|assistant|system|tool) [^\]\n]*\]$")
_CALL = re.compile(r"^-> call (\S+) (.*)$")
_RESULT = re.compile(r"^<- result of (\S*?):$")
_ERROR = re.compile(r"\b(ERROR|FATAL|Error|Exception|Traceback|No space left|quota exceeded)")
_STAMP = re.compile(r"^(?:\S+:\d+:)?\d{4}-\d{2}-\d{2}T[\d:.]+Z\s+")
_CONSTRAINT = re.compile(r"\b(must|never|don'?t|do not|only|always|without)\b", re.I)
_HEADING = re.compile(r"^#{2,3} (.+?)\s*$")
_CLIP = 220
_BRIEF = 100
_LIMITS = {"done": 10, "context": 10, "decisions": 5, "requests": 4}


def is_compactor_prompt(prompt: str) -> bool:
    """Whether `prompt` (a request's last user message) is a Compactor's: a plain request's
    transcript between message tags, or a prefix request's rules (the summary's headings)."""
    return ("<messages>" in prompt and "</messages>" in prompt) or HEADINGS in prompt


def content_text(content: object) -> str:
    """The text of a formatted message's content (a string, or a list of parts)."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(str(part.get("text", "")) for part in content if isinstance(part, dict))
    return ""


def compactor_request(messages: Sequence[Mapping[str, object]]) -> str | None:
    """The Compactor's request in a formatted prompt (OpenAI style): its last user message's
    text when that is a compactor's, else `None`."""
    prompt = next(
        (content_text(m.get("content")) for m in reversed(messages) if m.get("role") == "user"),
        "",
    )
    return prompt if is_compactor_prompt(prompt) else None


def _clip(text: str, limit: int = _CLIP) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _previous(prompt: str) -> dict[str, list[str]]:
    """The items of the previous summary in the prompt, by section (empty: none)."""
    head = prompt.split("<messages>", 1)[0]
    sections: dict[str, list[str]] = {}
    current: str | None = None
    for line in head.splitlines():
        heading = _HEADING.match(line)
        if heading is not None:
            current = heading[1].strip().lower()
            sections.setdefault(current, [])
        elif current is not None and line.strip().startswith("- "):
            item = line.strip()[2:].strip()
            if item and not item.startswith("("):
                sections[current].append(item)
    return sections


def _entries(transcript: str) -> list[tuple[str, list[str]]]:
    """The transcript as (role, lines) entries, oldest first."""
    entries: list[tuple[str, list[str]]] = []
    for line in transcript.splitlines():
        match = _ENTRY.match(line)
        if match is not None:
            entries.append((match[1], []))
        elif entries:
            entries[-1][1].append(line)
    return entries


def _call_item(name: str, raw: str) -> str:
    try:
        args = json.loads(raw)
    except ValueError:
        args = None
    if not isinstance(args, dict):
        return f"called `{name}` {_clip(raw)}"
    if name == "run_shell" and "command" in args:
        return f"ran `{args['command']}`"
    if name == "read_file" and "file_path" in args:
        return f"read `{args['file_path']}` from line {args.get('start_line', 1)}"
    if name == "search_history":
        return f"searched the history for {args.get('query', '')!r}"
    shown = ", ".join(f"{k}={_clip(str(v))[:60]!r}" for k, v in args.items())
    return f"called `{name}({shown})`"


class _Reading:
    """What the compactor model takes from the transcript."""

    def __init__(self) -> None:
        self.requests: list[str] = []
        self.constraints: list[str] = []
        self.done: list[str] = []
        self.decisions: list[str] = []
        self.context: list[str] = []
        self.answered_last = False
        self.last_call = ""
        self._saved: set[str] = set()

    def read(self, entries: list[tuple[str, list[str]]]) -> None:
        for role, lines in entries:
            if role == "user":
                self._user("\n".join(lines))
                continue
            self._other(lines)

    def _user(self, text: str) -> None:
        if not text.strip() or text.lstrip().startswith("<system-reminder>"):
            return  # (AgentScope 2.x adds the time as a user message: not a request)
        self.requests.append(_clip(text))
        self.answered_last = False
        for sentence in re.split(r"(?<=[.!?])\s+", text):
            if _CONSTRAINT.search(sentence):
                self.constraints.append(_clip(sentence))

    def _other(self, lines: list[str]) -> None:
        said: list[str] = []
        k = 0
        while k < len(lines):
            call, result = _CALL.match(lines[k]), _RESULT.match(lines[k])
            if call is not None:
                self.last_call = _call_item(call[1], call[2])
                self.done.append(self.last_call)
            elif result is not None:
                output: list[str] = []
                while k + 1 < len(lines) and _CALL.match(lines[k + 1]) is None:
                    if _RESULT.match(lines[k + 1]) is not None:
                        break
                    k += 1
                    output.append(lines[k])
                self._result(result[1], "\n".join(output))
            elif lines[k].strip():
                said.append(lines[k].strip())
            k += 1
        if said and not any(_CALL.match(line) for line in lines):
            self._answer(said)

    def _result(self, tool: str, output: str) -> None:
        parsed = parse_notice(output.rstrip("\n"))
        if parsed is not None:
            excerpt, notice = parsed
            if notice.file_path not in self._saved:  # the first output that points there
                self._saved.add(notice.file_path)
                what = self.last_call or f"`{tool}`"
                self.context.append(
                    f"{notice.total_lines} lines, whole in {notice.file_path} (from: {what}); "
                    "read on with read_file"
                )
            output = excerpt
        for line in output.splitlines():
            if _ERROR.search(line) and "transient" not in line:
                self.context.append(_clip(_STAMP.sub("", line.strip())))
                break

    def _answer(self, said: list[str]) -> None:
        self.answered_last = True
        picked = [line for line in said if line.startswith(("- ", "Fix", "Root cause", "Yes"))]
        for line in picked or said[:1]:  # in brief: the details stay in dialog/
            self.decisions.append(_clip(line.lstrip("- "), _BRIEF))


def _merge(old: list[str], new: list[str], limit: int) -> list[str]:
    """`old` then `new`, without repeats, the newest `limit` kept."""
    items: list[str] = []
    for item in [*old, *new]:
        if item not in items:
            items.append(item)
    return items[-limit:]


def _bullets(items: list[str], empty: str = "(none)", width: int = _CLIP) -> str:
    if not items:
        return f"- {empty}"
    return "\n".join(f"- {_clip(item, width)}" for item in items)


_TOO_LONG = re.compile(r"has (\d+) tokens, more than the (\d+) allowed")
"""A retry's reason when the previous answer was over the compactor's size limit: its tokens,
then the limit."""


def write_summary(prompt: str) -> str:
    """The summary a compactor's model would write for `prompt`, the last user message of a
    Compactor's request (see the module docstring); `NOT_A_SUMMARY` for any other prompt.
    Asked again because it was too long, it writes a shorter one (fewer, shorter items)."""
    if not is_compactor_prompt(prompt):
        return NOT_A_SUMMARY
    transcript = ""  # (a prefix request shows the older messages above it, not as a transcript)
    if "<messages>" in prompt and "</messages>" in prompt:
        transcript = prompt[prompt.index("<messages>") + 10 : prompt.rindex("</messages>")]
    # a prefix request's rules (they hold the headings) follow the summary it asks to update
    previous = {} if HEADINGS in prompt else _previous(prompt)
    reading = _Reading()
    reading.read(_entries(transcript))
    summary = _compose(previous, reading, 1.0)
    too_long = _TOO_LONG.search(prompt.split("</messages>")[-1])
    if too_long is not None:
        # The rejected answer was this summary: its own characters a token (identifiers and
        # numbers take more tokens than prose), for the limit, less a tenth
        had, limit = int(too_long[1]), int(too_long[2])
        chars = int(len(summary) * limit / max(had, 1) * 0.9)
        scale = 0.5
        while len(summary) > chars and scale > 0.05:
            summary, scale = _compose(previous, reading, scale), scale / 2
    return summary


def _compose(previous: dict[str, list[str]], reading: _Reading, scale: float) -> str:
    """The summary's sections, each keeping `scale` of its items (at least one), each item
    `scale` of its length (at least 40 characters)."""

    def keep(limit: int) -> int:
        return max(1, round(limit * scale))

    width = max(40, round(_CLIP * scale))
    goal = previous.get("goal") or reading.requests[:1] or ["(not stated in these messages)"]
    later = [r for r in reading.requests if r not in goal][-keep(_LIMITS["requests"]) :]
    goal_items = [*goal[:1], *(f"then: {r}" for r in later)]
    in_progress = [] if reading.answered_last or not later else [later[-1]]
    next_steps = (
        [f"answer the latest request: {reading.requests[-1]}"]
        if reading.requests and not reading.answered_last
        else ["wait for the user's next request; older details are in dialog/"]
    )

    def merged(section: str, new: list[str], limit: int) -> str:
        return _bullets(_merge(previous.get(section, []), new, keep(limit)), width=width)

    parts = [
        "## Goal",
        _bullets(goal_items, width=width),
        "## Constraints",
        merged("constraints", reading.constraints, 6),
        "## Progress",
        "### Done",
        merged("done", reading.done, _LIMITS["done"]),
        "### In progress",
        _bullets(in_progress, width=width),
        "### Blocked",
        _bullets([]),
        "## Key Decisions",
        merged("key decisions", reading.decisions, _LIMITS["decisions"]),
        "## Next Steps",
        _bullets(next_steps, width=width),
        "## Critical Context",
        merged("critical context", reading.context, _LIMITS["context"]),
    ]
    return "\n".join(parts) + "\n"
