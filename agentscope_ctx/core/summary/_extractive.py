"""The deterministic summary: what the Compactor falls back to when the model cannot help.

`extractive_summary` builds the sectioned summary from the messages themselves, with no model:
user requests become the Goal, user sentences with "must", "don't", "never"... the Constraints,
tool calls and their outcomes the Progress, error lines and file paths the Critical Context, and
the assistant's last stated plan the Next Steps. It merges into the previous summary's sections,
deduplicates, and caps every section, so its size is bounded whatever the input.

The summary format (shared with the model-written one; headings stay English in every
language so that `validate_summary` and later merges can parse them)::

    ## Goal / ## Constraints / ## Progress (### Done, ### In progress, ### Blocked) /
    ## Key Decisions / ## Next Steps / ## Critical Context
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .._entry import Msg
from ._outcome import ReadSaved, error_lines, judge

__all__ = [
    "MIN_SUMMARY_CHARS",
    "REQUIRED_SECTIONS",
    "SECTIONS",
    "extractive_summary",
    "msg_text",
    "render_msg",
    "validate_summary",
]

SECTIONS = ("Goal", "Constraints", "Progress", "Key Decisions", "Next Steps", "Critical Context")
"""The summary's `##` headings, in order."""
REQUIRED_SECTIONS = SECTIONS[:5]
"""The headings a summary must have to be accepted (Critical Context is welcome, not required)."""
MIN_SUMMARY_CHARS = 1_000
"""The smallest `max_chars` `extractive_summary` honours."""
_PARTS = ("Done", "In progress", "Blocked")
_ALIASES = {"目标": "Goal", "约束": "Constraints", "进展": "Progress", "关键决策": "Key Decisions",
            "下一步": "Next Steps", "关键上下文": "Critical Context"}  # fmt: skip
_NONE = {"en": "(none)", "zh": "（无）"}
_LABELS = {"en": ("Error", "File", "ok", "failed", "no result yet", "not seen whole"),
           "zh": ("错误", "文件", "成功", "失败", "尚无结果", "未完整查看")}  # fmt: skip
# (item clip, cap scale) tried in turn until the summary fits `max_chars`.
_LEVELS = ((200, 1.0), (120, 0.5), (80, 0.25), (48, 0.0))
_CAPS = {"Goal": 4, "Constraints": 8, "Done": 8, "In progress": 4, "Blocked": 4,
         "Key Decisions": 5, "Next Steps": 4, "Critical Context": 16}  # fmt: skip

_CONSTRAINT = re.compile(
    r"\b(must|mustn't|don'?t|do not|never|always|only|should|shouldn'?t|make sure|avoid|"
    r"prefer|need to|without)\b|必须|不要|不能|别|永远|总是|只|应该|务必|禁止|一定要|避免",
    re.I,
)
_DECISION = re.compile(
    r"\b(decided?|instead|because|chose|choose|going with|switch(?:ed)? to|will use)\b"
    r"|决定|改用|因为|选择",
    re.I,
)
_PLAN = re.compile(
    r"\b(next|then|will|I'll|let me|plan|going to|need to)\b|接下来|然后|下一步|计划|将", re.I
)
_LIST_ITEM = re.compile(r"^\s*(?:\d+[.)]|[-*•])\s+")
_EXT = r"(?:py|pyi|md|markdown|txt|json|jsonl|ya?ml|toml|ini|cfg|sh|js|ts|tsx|jsx|go|rs|java|c|h|cc|cpp|hpp|cs|rb|php|html|css|sql|csv|ipynb|lock|log)"  # noqa: E501
_PATH = re.compile(
    r"(?<![\w/.:\\-])("
    r"(?:~|\.{1,2})?/?(?:[\w@+-][\w@.+-]*/)+[\w@+-][\w@.+-]*\.[A-Za-z][A-Za-z0-9]{0,7}"
    rf"|[\w-]+\.{_EXT}"
    r")((?::\d+)?)(?![\w/])"
)
_SPLIT = re.compile(r"(?<=[.!?。！？;；])\s+|\n")


def _blocks(msg: Msg) -> list[Mapping[str, Any]]:
    """The message's content as blocks, whatever it holds: a string is one text block,
    ``None`` no block (as AgentScope reads it), and anything else that is not a block its text.
    So one odd message never stops a summary."""
    content: object = msg.content
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    items = content if isinstance(content, (list, tuple)) else [content]
    return [
        b if isinstance(b, Mapping) else {"type": "text", "text": str(b)}
        for b in items
        if b is not None
    ]


def msg_text(msg: Msg) -> str:
    """The plain text of a message's text blocks (thinking, tools and media left out)."""
    if isinstance(msg.content, str):
        return msg.content
    return "\n".join(str(b.get("text", "")) for b in _blocks(msg) if b.get("type") == "text")


def _result_text(output: object) -> str:
    if isinstance(output, str):
        return output
    parts: list[str] = []
    for block in output if isinstance(output, list) else []:
        if isinstance(block, dict):
            kind = block.get("type")
            parts.append(str(block.get("text", "")) if kind == "text" else f"[{kind}]")
    return "\n".join(parts)


def _args(raw: object) -> str:
    try:
        return json.dumps(raw, ensure_ascii=False, default=str)
    except (TypeError, ValueError, RecursionError):  # a cycle, odd keys: its Python text
        return str(raw)


def render_msg(msg: Msg) -> str:
    """A compact transcript entry: role and name, text, tool calls with JSON input, results."""
    lines = [f"[{msg.role} {msg.name}]"]
    for block in _blocks(msg):
        kind = block.get("type")
        if kind == "text":
            lines.append(str(block.get("text", "")))
        elif kind == "tool_use":
            lines.append(f"-> call {block.get('name')} {_args(block.get('input', {}))}")
        elif kind == "tool_result":
            lines.append(f"<- result of {block.get('name')}:\n{_result_text(block.get('output'))}")
        elif kind != "thinking":
            lines.append(f"[{kind}]")
    return "\n".join(lines)


def validate_summary(summary: str) -> str | None:
    """Check a summary's shape. Returns what is wrong, or `None` when it is acceptable."""
    if not summary.strip():
        return "the summary is empty"
    found = {_section_of(line) for line in summary.splitlines() if line.lstrip().startswith("#")}
    missing = [name for name in REQUIRED_SECTIONS if name not in found]
    if missing:
        listed = ", ".join(f"'## {name}'" for name in missing)
        return f"the summary lacks the section(s) {listed}"
    if not any(line.strip() and not line.lstrip().startswith("#") for line in summary.splitlines()):
        return "the summary has headings but no content"
    return None


def _section_of(heading: str) -> str | None:
    title = heading.strip().lstrip("#").strip().strip("*").strip()
    for name in SECTIONS:
        if re.match(rf"{re.escape(name)}\b", title, re.I):
            return name
    return next((name for alias, name in _ALIASES.items() if title.startswith(alias)), None)


def _clip(text: str, limit: int) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def _parse(summary: str) -> dict[str, list[str]]:
    """Items of a previous summary by section (Progress split into its three parts)."""
    items: dict[str, list[str]] = {key: [] for key in _CAPS}
    section: str | None = None
    part = "Done"
    for raw in summary.splitlines():
        line = raw.strip()
        if not line:
            continue
        sub = re.match(r"^(?:#{3,6}\s*|[-*]\s*)?\**\s*(Done|In progress|Blocked)\b\**:?\s*(.*)$",
                       line, re.I)  # fmt: skip
        if section == "Progress" and sub:
            part = next(p for p in _PARTS if p.lower() == sub[1].lower())
            line = sub[2]
        elif line.startswith("#"):
            section = _section_of(line) or ("Critical Context" if section else None)
            part = "Done"
            continue
        line = _LIST_ITEM.sub("", line).strip()
        if section and line and line not in _NONE.values():
            items[part if section == "Progress" else section].append(line)
    return items


def _sentences(text: str) -> list[str]:
    return [s.strip() for s in _SPLIT.split(text) if s.strip()]


def _paths(text: str) -> list[str]:
    return [m[1] + m[2] for m in _PATH.finditer(text)]


def _extract(
    messages: Sequence[Msg], lang: str, read_saved: ReadSaved | None
) -> dict[str, list[str]]:
    """New items found in the messages, by section (Critical Context in message order)."""
    err_label, file_label, ok, failed, pending, unseen = _LABELS[lang]
    new: dict[str, list[str]] = {key: [] for key in _CAPS}
    results: dict[str, str] = {}
    for msg in messages:
        for block in _blocks(msg):
            if block.get("type") == "tool_result":
                results[str(block.get("id"))] = _result_text(block.get("output"))
    context = new["Critical Context"]

    def note(text: str, errors: list[str]) -> None:
        context.extend(f"{file_label}: {p}" for p in _paths(text))
        context.extend(f"{err_label}: {e}" for e in errors)

    last_plan: list[str] = []
    for msg in messages:
        text = msg_text(msg)
        if msg.role == "user" and text.strip() and not text.lstrip().startswith("<system-"):
            new["Goal"].append(text)
            new["Constraints"] += [s for s in _sentences(text) if _CONSTRAINT.search(s)]
            note(text, error_lines(text))
        elif msg.role == "assistant" and text.strip():
            new["Key Decisions"] += [s for s in _sentences(text) if _DECISION.search(s)]
            plan = [ln for ln in text.splitlines() if _LIST_ITEM.match(ln)]
            plan += [s for s in _sentences(text) if _PLAN.search(s) and not _LIST_ITEM.match(s)]
            last_plan = plan or _sentences(text)[:1]
            note(text, [])
        for block in _blocks(msg):
            if block.get("type") != "tool_use":
                continue
            args = _args(block.get("input", {}))
            call = f"`{block.get('name')}` {args}"
            result = results.get(str(block.get("id")))
            if result is None:
                note(args, [])
                new["In progress"].append(f"{call} → {pending}")
                continue
            outcome = judge(result, read_saved)
            errors = error_lines(result)
            if outcome.status == "failed" and outcome.detail not in errors:
                errors += error_lines(outcome.detail)  # from the saved file of a cut output
            note(args + "\n" + result, errors)
            if outcome.status == "failed":
                new["Blocked"].append(f"{call} → {failed}: {outcome.detail}")
            elif outcome.status == "unseen":
                new["In progress"].append(f"{call} → {unseen}")
            else:
                new["Done"].append(f"{call} → {ok}")
    new["Next Steps"] = [_LIST_ITEM.sub("", ln) for ln in last_plan]
    return new


def _merge(old: Iterable[str], new: Iterable[str], clip: int, cap: int) -> list[str]:
    """Old then new items, clipped and deduplicated; over `cap`, the first and newest stay."""
    seen: set[str] = set()
    out: list[str] = []
    for item in [*old, *new]:
        item = _clip(item, clip)
        key = item.casefold()
        if item and key not in seen:
            seen.add(key)
            out.append(item)
    return out if len(out) <= cap else out[:1] + out[len(out) - cap + 1 :]


def _render(items: dict[str, list[str]], lang: str) -> str:
    def bullets(values: list[str]) -> list[str]:
        return [f"- {v}" for v in values] or [f"- {_NONE[lang]}"]

    out: list[str] = []
    for name in SECTIONS:
        out.append(f"## {name}")
        if name == "Progress":
            for part in _PARTS:
                out += [f"### {part}", *bullets(items[part])]
        else:
            out += bullets(items[name])
        out.append("")
    return "\n".join(out).rstrip() + "\n"


def extractive_summary(
    previous_summary: str,
    messages: Sequence[Msg],
    *,
    language: str = "en",
    max_chars: int = 12_000,
    read_saved: ReadSaved | None = None,
) -> str:
    """Build the sectioned summary from the messages alone, merged into the previous one.

    Pure and deterministic. The result always passes `validate_summary` and is at most
    `max(max_chars, MIN_SUMMARY_CHARS)` characters long: sections are capped (the first and the
    newest items stay) and items clipped, harder until the summary fits.

    Args:
        previous_summary: The summary being updated (any text; its `##` sections are merged).
        messages: The messages the summary replaces, oldest first.
        language: `"en"` or `"zh"`: the language of labels and placeholders.
        max_chars: Upper bound of the result's length, in characters.
        read_saved: Reads back a saved output by its path (head and tail, bounded), so that
            a tool call whose output was cut or masked before compaction is judged from the
            whole output; without it (or when it gives `None`) such a call is reported "not
            seen whole" unless its excerpt already shows the failure, never "ok".

    Returns:
        The summary as Markdown.
    """
    lang = language if language in _NONE else "en"
    old = _parse(previous_summary)
    new = _extract(messages, lang, read_saved)
    if not new["Next Steps"]:
        new["Next Steps"], old["Next Steps"] = old["Next Steps"], []
    else:
        old["Next Steps"] = []
    limit = max(max_chars, MIN_SUMMARY_CHARS)
    summary = ""
    for clip, scale in _LEVELS:
        caps = {k: max(1, int(v * scale)) for k, v in _CAPS.items()}
        merged = {k: _merge(old[k], new[k], clip, caps[k]) for k in _CAPS}
        summary = _render(merged, lang)
        if len(summary) <= limit:
            break
    return summary
