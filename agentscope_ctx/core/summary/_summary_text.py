"""The text of the summary message (`ContextMemory.summary_message`): the long-term memory
note, the compact summary and the guide that tells the agent where the raw history is, in the
memory's language."""

from __future__ import annotations

from pathlib import Path

__all__ = ["LANGUAGES", "note_left_out", "summary_text"]

_GUIDE = {
    "en": (
        "Older messages of this conversation were moved out of the context. This summary "
        "replaces them. The raw messages are saved, one JSON object per line, in "
        "{days} (one file per day). If you need an exact detail, read "
        "them with `read_file`, starting from the newest file and going backwards."
    ),
    "zh": (
        "本对话较早的消息已移出上下文，由以下摘要代替。原始消息按日期保存在 "
        "{days}（每行一个 JSON 对象）。如需确切细节，请用 `read_file` "
        "从最新的文件开始向前阅读。"
    ),
}


_NOTE_LEFT_OUT = {
    "en": "(Not shown, for lack of room in the prompt: the long-term memory is in "
    "{path}; read it with `read_file` when you need it.)",
    "zh": "（提示空间不足，长期记忆未显示：它保存在 {path}，需要时请用 `read_file` 阅读。）",
}


_UNSAVED = {
    "en": " ({n} older messages are not shown and not yet in {where}: they could not be saved;"
    " they are kept and will be saved when {what} works again.)",
    "zh": "（另有 {n} 条较早的消息暂未显示，也尚未写入 {where}：保存失败；"
    "它们仍被保留，{what}恢复后会写入。）",
}

_DISK = {"en": "the disk", "zh": "磁盘"}
_DATABASE = {"en": "the database", "zh": "数据库"}

LANGUAGES = tuple(_GUIDE)
"""The languages of the guide texts (`ContextMemory(language=...)`; others fall back to en)."""


def note_left_out(path: Path, language: str) -> str:
    """What stands for the long-term note when the prompt had no room for it."""
    return _NOTE_LEFT_OUT[language].format(path=path)


def summary_text(
    summary: str,
    unsaved: int,
    note: str | None,
    working_dir: Path,
    language: str,
    *,
    days: str | None = None,
) -> str:
    """The summary message's text ("" when there is nothing to present): `note` (the head of
    MEMORY.md), then `summary` with the guide to ``dialog/`` (`days`: how the dialog's days
    are named when they are not ``working_dir/dialog/YYYY-MM-DD.jsonl``) and how many
    compacted messages are not saved yet (`unsaved`)."""
    parts = []
    if note:
        parts.append(f"<long_term_memory>\n{note}\n</long_term_memory>")
    if summary:
        guide = _GUIDE[language].format(days=days or f"{working_dir / 'dialog'}/YYYY-MM-DD.jsonl")
        if unsaved:
            where, what = (days, _DATABASE) if days else ("dialog/", _DISK)
            guide += _UNSAVED[language].format(n=unsaved, where=where, what=what[language])
        parts.append(f"<compact_summary>\n{guide}\n\n{summary}\n</compact_summary>")
    return "\n\n".join(parts)
