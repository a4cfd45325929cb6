"""What the Compactor says (`_compactor`): its system prompt and the words of its two request
forms, in English and Chinese (section headings stay English in every language, see
`_extractive`).

- `plain_prompt`: the user message of a plain request (the compactor's own system prompt,
  `SYSTEM`, before it): the previous summary, a transcript of the chunk to fold in, the
  user's extra instruction, a rejected answer's error.
- `prefix_instruction`: the one user message a prefix request adds after the agent's last
  prompt (`_prefix.LastPrompt`): the system prompt is the agent's, so the rules come with it;
  the previous summary and the messages to fold in are named by where they are in the prompt
  above (up to the first message that stays, `Prefix.anchor`), and only the older messages it
  did not show are given as a transcript.
- `clean_answer` drops a preamble or a code fence around the model's summary; `cut_to_tokens`
  cuts a transcript too long for the compactor's input budget, with a note.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .._entry import Msg
    from ..tokens._tokens import TokenCounter
    from ._prefix import Prefix

__all__ = [
    "SYSTEM",
    "Ask",
    "clean_answer",
    "cut_to_tokens",
    "plain_prompt",
    "prefix_instruction",
]

HEADINGS = (
    "## Goal\n## Constraints\n## Progress\n### Done\n### In progress\n### Blocked\n"
    "## Key Decisions\n## Next Steps\n## Critical Context"
)
INTRO = {
    "en": (
        "You are the context compactor of an AI agent. You write the structured summary that "
        "replaces the older part of the agent's conversation, so that the agent can continue "
        "its work from the summary and the newest messages alone.\n\n"
    ),
    "zh": (
        "你是一个 AI 智能体的上下文压缩器。你要写一份结构化摘要，用来替换智能体对话中较早的部分，"
        "使智能体仅凭这份摘要和最新的消息就能继续工作。\n\n"
    ),
}
RULES = {
    "en": (
        "Rules:\n"
        "- Answer with the summary only, in Markdown, with exactly these headings in this "
        f"order:\n{HEADINGS}\n"
        "- Update the previous summary with the new messages: keep what still holds, change "
        "what changed, drop what is obsolete. Never drop a constraint the user set.\n"
        "- Copy verbatim: file paths, function and class names, commands, error messages, "
        "identifiers, numbers and URLs.\n"
        "- The user's latest corrections and preferences override earlier instructions; "
        "record them under Constraints.\n"
        "- Be concise: short bullet points, no preamble, no closing remarks; the summary must "
        "be much shorter than the messages it replaces. Write '- (none)' for an empty section."
    ),
    "zh": (
        "规则：\n"
        f"- 只输出摘要本身，使用 Markdown，并严格按此顺序使用以下英文标题（标题保持英文原样，"
        f"不要翻译）：\n{HEADINGS}\n"
        "- 正文用中文书写。用新消息更新之前的摘要：保留仍然成立的内容，修改已变化的内容，"
        "删除过时的内容。不要丢弃用户设定的任何约束。\n"
        "- 原样保留：文件路径、函数名和类名、命令、错误信息、标识符、数字和 URL。\n"
        "- 用户最新的更正和偏好优先于之前的指示，把它们记在 Constraints 下。\n"
        "- 简洁：使用简短的要点，不要开场白和结束语；摘要必须比它替换的消息短得多。"
        "空的章节写 '- （无）'。"
    ),
}
SYSTEM = {language: INTRO[language] + RULES[language] for language in INTRO}
TEXT = {
    "en": {
        "previous": "Previous summary:",
        "none": "(none: this is the first summary)",
        "messages": "Messages to fold into the summary (oldest first){part}:",
        "part": ", part {n}; older parts are already in the previous summary",
        "more": "More messages follow after these; they will be folded in later.",
        "extra": "Additional instruction from the user for this summary:",
        "retry": "Your previous answer was rejected: {error}. Answer again with the full summary.",
        "go": "Write the updated summary now.",
        "prefix": (
            "[agentscope_ctx: context compaction. This message comes from the context "
            "manager, not from the user. Do not call any tool: answer in text.]"
        ),
        "previous_above": "Previous summary: the summary at the start of the conversation above.",
        "fold_upto": (
            "Messages to fold into the summary: the conversation above, from its start up to "
            "(not including) the {anchor}; that message and the ones after it stay in the "
            "context as they are."
        ),
        "fold_all": "Messages to fold into the summary: the whole conversation above.",
        "unseen": "Messages not shown above, to fold in too (oldest first):",
        "said": "{role} message that begins: «{text}»",
        "called": "{role} message that calls the tool {name!r}",
        "result": "{role} message with the result of the tool {name!r}",
        "message": "{role} message of {name}",
    },
    "zh": {
        "previous": "之前的摘要：",
        "none": "（无：这是第一份摘要）",
        "messages": "需要并入摘要的消息（从旧到新）{part}：",
        "part": "，第 {n} 部分；更早的部分已包含在之前的摘要中",
        "more": "这些消息之后还有更多消息，稍后会再并入。",
        "extra": "用户对本次摘要的附加要求：",
        "retry": "你上一次的回答被拒绝了：{error}。请重新输出完整的摘要。",
        "go": "现在写出更新后的摘要。",
        "prefix": (
            "[agentscope_ctx：上下文压缩。这条消息来自上下文管理器，不是用户发的。"
            "不要调用任何工具，直接用文字回答。]"
        ),
        "previous_above": "之前的摘要：上面对话开头的那份摘要。",
        "fold_upto": (
            "需要并入摘要的消息：上面的对话，从开头到（不包括）{anchor}；"
            "这条消息及其后的消息原样保留在上下文中。"
        ),
        "fold_all": "需要并入摘要的消息：上面的全部对话。",
        "unseen": "上面没有出现、也需要并入的消息（从旧到新）：",
        "said": "以「{text}」开头的 {role} 消息",
        "called": "调用工具 {name!r} 的 {role} 消息",
        "result": "包含工具 {name!r} 结果的 {role} 消息",
        "message": "{name} 的 {role} 消息",
    },
}


@dataclass(frozen=True)
class Ask:
    """One request (a chunk's, or the prefix request's): what the prompt holds, and the
    tokens the answer replaces."""

    summary: str
    transcript: str
    extra: str | None
    part: int | None
    more: bool
    replaced: int
    prefix: Prefix | None = None


def plain_prompt(ask: Ask, error: str | None, language: str) -> str:
    """The user message of a plain request (`error`: why the previous answer was rejected)."""
    t = TEXT[language]
    part = t["part"].format(n=ask.part) if ask.part else ""
    lines = [t["previous"], ask.summary.strip() or t["none"], ""]
    lines += [t["messages"].format(part=part), "<messages>", ask.transcript, "</messages>"]
    if ask.more:
        lines.append(t["more"])
    return _closed(lines, ask, error, t)


def prefix_instruction(ask: Ask, error: str | None, language: str) -> str:
    """The user message of a prefix request (the rules with it: the system prompt is the
    agent's)."""
    assert ask.prefix is not None
    t = TEXT[language]
    lines = [t["prefix"], "", INTRO[language] + RULES[language], ""]
    lines.append(t["previous_above"] if ask.summary.strip() else f"{t['previous']} {t['none']}")
    anchor = ask.prefix.anchor
    lines.append(
        t["fold_all"] if anchor is None else t["fold_upto"].format(anchor=_anchor(anchor, t))
    )
    if ask.transcript:
        lines += ["", t["unseen"], "<messages>", ask.transcript, "</messages>"]
    return _closed(lines, ask, error, t)


def _closed(lines: list[str], ask: Ask, error: str | None, t: dict[str, str]) -> str:
    """Either request's end: the caller's extra instruction, the retry's reason, the go."""
    if ask.extra and ask.extra.strip():
        lines += ["", t["extra"], ask.extra.strip()]
    if error:
        lines += ["", t["retry"].format(error=error)]
    lines += ["", t["go"]]
    return "\n".join(lines)


def _anchor(msg: Msg, t: dict[str, str]) -> str:
    """How the instruction names the first message that stays."""
    role = str(msg.role)
    for block in msg.get_content_blocks():
        kind = block.get("type")
        if kind == "text" and str(block.get("text", "")).strip():
            text = " ".join(str(block.get("text")).split())
            return t["said"].format(role=role, text=text[:80] + ("..." if len(text) > 80 else ""))
        if kind == "tool_use":
            return t["called"].format(role=role, name=str(block.get("name")))
        if kind == "tool_result":
            return t["result"].format(role=role, name=str(block.get("name")))
    return t["message"].format(role=role, name=str(msg.name))


_CUT_NOTE = "\n[... cut to fit the compactor's input budget: {shown} of {total} characters shown]"


def clean_answer(answer: str) -> str:
    """Drop a preamble before the first heading, and a code fence wrapping the summary."""
    text = answer.strip()
    first = re.search(r"^#", text, re.M)
    fence = re.search(r"^```[\w-]*[ \t]*$", text, re.M)
    if fence and (first is None or fence.start() < first.start()):
        text = text[fence.end() :]
        close = text.rfind("\n```")
        text = text[:close] if close != -1 else text
        first = re.search(r"^#", text, re.M)
    return (text[first.start() :] if first else text).strip() + "\n"


async def cut_to_tokens(counter: TokenCounter, text: str, max_tokens: int) -> str:
    """Cut `text` (at a line end when one is near) so it fits `max_tokens` with the note."""
    note = _CUT_NOTE.format(shown=len(text), total=len(text))
    budget = max_tokens - await counter.count_text(note) - 2
    low, high = 0, len(text)
    while low < high:  # longest prefix within the budget
        mid = (low + high + 1) // 2
        if await counter.count_text(text[:mid]) <= budget:
            low = mid
        else:
            high = mid - 1
    newline = text.rfind("\n", 0, low)
    shown = newline if newline > low // 2 else low
    return text[:shown] + _CUT_NOTE.format(shown=shown, total=len(text))
