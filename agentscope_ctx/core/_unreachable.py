"""`unreachable`: whether a model call failed because the model server could not be reached
(nothing was sent: no provider refused anything), and at which URL.

The providers' SDKs raise their own classes for it (OpenAI's and Anthropic's
``APIConnectionError`` and ``APITimeoutError``, httpx's ``ConnectError`` and
``ConnectTimeout``, aiohttp's ``ClientConnectorError``, Python's ``ConnectionError``), most
carrying the request (``exc.request.url``), some only in the chained cause. They are told
apart by class name, so that nothing here imports an SDK.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["unreachable"]

_CONNECTION_ERRORS = frozenset(
    {
        "APIConnectionError",
        "APITimeoutError",
        "ConnectError",
        "ConnectTimeout",
        "ClientConnectorError",
        "ClientConnectionError",
        "ServerDisconnectedError",
    }
)
_CHAIN = 8
"""How many causes to look through."""


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _CHAIN:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _is_connection_error(exc: BaseException) -> bool:
    if isinstance(exc, ConnectionError):
        return True
    return any(kind.__name__ in _CONNECTION_ERRORS for kind in type(exc).__mro__)


def _url(exc: BaseException) -> str | None:
    try:  # httpx raises RuntimeError for an error built without its request
        request = getattr(exc, "request", None)
        url = getattr(request, "url", None)
    except Exception:
        return None
    return None if url is None else str(url)


def unreachable(exc: BaseException, fallback_url: str | None = None) -> str | None:
    """``"cannot reach the model server at URL (Class: message)"`` when `exc` (or an error it
    was raised from) is a failed connection; `None` for any other error. `fallback_url`
    names the server when the error does not (e.g. the model's ``base_url``)."""
    chain = list(_chain(exc))
    failed = next((e for e in chain if _is_connection_error(e)), None)
    if failed is None:
        return None
    url = next((u for u in map(_url, chain) if u), None) or fallback_url
    where = f" at {url}" if url else " (no URL known)"
    text = " ".join(str(failed).split()) or type(failed).__name__
    return f"cannot reach the model server{where} ({type(failed).__name__}: {text[:160]})"
