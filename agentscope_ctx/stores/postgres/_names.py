"""Agent names and session ids as PostgreSQL text holds them, reversibly.

PostgreSQL's ``text`` takes no NUL, and UTF-8 cannot encode a lone surrogate; a name holding
either would stop every write of its agent. A config refuses both (`core.config._config_base.
PlainName`), but an agent's name is not config: it comes from the agent at run time. So the
store writes every agent and session column through `db_name` and filters by it, and reads
them back through `name_from_db`:

- a name with neither, and not starting with `MARK`, is stored as it is (every ordinary
  name: the stored rows read as before);
- any other is stored as `MARK` followed by the name with each NUL, lone surrogate and
  backslash written ``\\XXXX`` (four hex digits of its code point): ``"bot\\x00"`` is stored
  as ``"␛bot\\0000"``.

The mapping is one to one (two names never share a stored form): a stored form starting with
`MARK` is always an escaped one, and the escapes are undone exactly.
"""

from __future__ import annotations

import re

__all__ = ["MARK", "db_name", "name_from_db"]

MARK = "\u241b"
"""``␛`` (SYMBOL FOR ESCAPE): starts the stored form of a name that needed escaping."""

_ESCAPED = re.compile(r"[\x00\\\ud800-\udfff]")
_UNESCAPE = re.compile(r"\\([0-9a-f]{4})")


def _needs_escaping(name: str) -> bool:
    if name.startswith(MARK) or "\x00" in name:
        return True
    return not name.isascii() and any("\ud800" <= c <= "\udfff" for c in name)


def db_name(name: str | None) -> str | None:
    """`name` as the database stores it (see the module docstring); `None` stays `None`."""
    if name is None or not _needs_escaping(name):
        return name
    return MARK + _ESCAPED.sub(lambda m: f"\\{ord(m[0]):04x}", name)


def name_from_db(stored: str | None) -> str | None:
    """The name `stored` holds (the inverse of `db_name`)."""
    if stored is None or not stored.startswith(MARK):
        return stored
    return _UNESCAPE.sub(lambda m: chr(int(m[1], 16)), stored[len(MARK) :])
