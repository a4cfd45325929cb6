"""Message time stamps in one shape, so that string order is time order (issue 19.10).

AgentScope 1.x stamps a message ``2026-12-03 14:48:00.123`` (local time); 2.x stamps it with
``datetime.now().isoformat()``, ``2026-12-03T14:48:00.123456``, and a timestamp factory of
the user's may add an offset (``+08:00``, ``Z``). Compared as strings, the ``T`` sorts after
every ``2026-12-03 HH:MM``, so a `since` one hour later still matched and an `until` one hour
later did not. `local_stamp` writes every form as local ``YYYY-MM-DD HH:MM[:SS[.fff]]``: the
search index stores it and the `since`/`until` filters are given it (`parse_time`); the
eviction index reads its minutes from it.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta, timezone

__all__ = ["local_stamp"]

_STAMP = re.compile(
    r"(?P<date>\d{4}-\d{2}-\d{2})"
    r"(?:[ T](?P<hm>\d{2}:\d{2})(?::(?P<s>\d{2})(?:[.,](?P<frac>\d+))?)?"
    r"\s*(?P<zone>Z|z|[+-]\d{2}(?::?\d{2})?)?)?"
)


def local_stamp(value: object) -> str | None:
    """`value` (a time stamp of either line, or a ``since``/``until`` input) as local
    ``YYYY-MM-DD[ HH:MM[:SS[.fff]]]``, keeping the precision given; `None` when it is not a
    valid date and time. A stamp with an offset is converted to local time."""
    if not isinstance(value, str):
        return None
    match = _STAMP.fullmatch(value.strip())
    if match is None:
        return None
    date, hm, seconds, frac, zone = match.group("date", "hm", "s", "frac", "zone")
    try:
        when = datetime.strptime(f"{date} {hm or '00:00'}:{seconds or '00'}", "%Y-%m-%d %H:%M:%S")
    except ValueError:  # 2026-13-03, 25:00, ...
        return None
    if hm is None:
        return date
    if zone is not None:
        try:
            when = when.replace(tzinfo=_zone(zone)).astimezone().replace(tzinfo=None)
        except (ValueError, OverflowError):  # an offset of a day or more; year 1 or 9999
            return None
        date, hm = when.strftime("%Y-%m-%d"), when.strftime("%H:%M")
        seconds = when.strftime("%S") if seconds is not None else None
    text = f"{date} {hm}"
    if seconds is not None:
        text += f":{seconds}" + (f".{frac}" if frac else "")
    return text


def _zone(text: str) -> timezone:
    if text in ("Z", "z"):
        return timezone.utc
    digits = text[1:].replace(":", "")
    offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or 0))
    return timezone(-offset if text[0] == "-" else offset)
