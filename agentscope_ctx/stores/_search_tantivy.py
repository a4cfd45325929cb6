"""The text index of the local search (`_search_db`): a Tantivy index beside the SQLite
metadata, one per index generation (``index/tantivy-{hex}/`` beside ``search-{hex}.sqlite3``).

One Tantivy document per chunk: its tokens (ours, `_search_text.tokens`: see `ANALYZER`), the
prefixes of its words (``prefixes``: see `chunk_prefixes`), its pairs of CJK characters
(``pairs``: see `chunk_pairs`), its text (stored, compressed by
Tantivy's doc store in blocks: the text is not kept anywhere else in the index), where it
starts (``start_line``, ``line_offset``), and the fields a search filters on, copied from its
``docs`` row when the transaction commits: ``path``, ``off`` (the doc's byte offset),
``kind``, ``role``, ``agent``, ``session`` (the owner columns), ``tags`` (a saved output's
tenant tags, from its name), ``ts`` (digits of the local time) and ``doc``; and its era key
(``key``: `chunk_era_key`) and era (``era``: that key and a number): which `ERA_CHUNKS` of
its key's chunks it is among, counted as they are written (a tenant's search ranks its
newest eras first, and finds what it may see by its keys: `_search_query`).

Tantivy and SQLite commit separately; Tantivy first. A crash between the two leaves Tantivy
documents that SQLite does not count as indexed: every indexing step deletes, before adding,
what Tantivy holds of its file from where it starts (`TextBatch.delete_from`,
`delete_path`), so indexing again never duplicates; a search joins each hit to its ``docs``
row by id and path, so a stale document is never shown.

Writes are buffered in a `TextBatch` while SQLite's write transaction is open (savepoints
truncate it), then applied by one Tantivy writer, committed, and its merges waited for. One
writer per index at a time (Tantivy's lock file): another process's writer is waited for
until the caller's deadline, then `IndexBusy`.

Tantivy reads the index through memory maps, which a search reads at random and a merge in
order: `advise_maps` tells the kernel so, after each reload of the reader and while the writer
writes. After each commit the writer also asks for the files every search reads some of (term
dictionaries, field norms, fast fields: `preload`) to be read into the page cache.
"""

from __future__ import annotations

import functools
import itertools
import mmap
import os
import re
import sqlite3
import stat
from pathlib import Path
from typing import Any

import tantivy

from ..core._tenant import Tenant
from ..core.search._search_text import _CJK, folded

__all__ = [
    "ANALYZER",
    "DOC_SHIFT",
    "ERA_CHUNKS",
    "FLUSH_BYTES",
    "HEAP_BYTES",
    "NONE",
    "PRELOAD",
    "PRELOAD_BYTES",
    "TextIndexError",
    "WriterBusy",
    "advise_maps",
    "chunk_era_key",
    "chunk_pairs",
    "chunk_prefixes",
    "chunk_terms",
    "create_index",
    "era_key",
    "era_term",
    "is_panic",
    "newest_era",
    "open_index",
    "output_tags",
    "own_tags",
    "owner_value",
    "preload",
    "query_tokens",
    "tighten",
    "ts_digits",
]

FLUSH_BYTES = 8 << 20
"""Chunk bytes a batch buffers before it commits and starts a new transaction."""
HEAP_BYTES = 64_000_000
"""The Tantivy writer's memory (one indexing thread)."""
PREFIX_CHARS = 6
"""A word's prefixes of up to this many characters are terms of the ``prefixes`` field, so that
a prefix query (``word*``) is one term of a posting list, not Tantivy's regex over every word
that starts so (whose cost grows with all their postings: 1.4 ms at 10k messages, 13.5 ms at
100k for ``w01*`` in the store benchmark)."""
NONE = "\x01"
"""The value of an owner field that is not known (NULL in ``docs``)."""
_ANALYZER = "ctx_tokens"
_DIGITS = re.compile(r"\d")
_RAW = ("path", "kind", "role", "agent", "session", "tags")


DOC_SHIFT = 24
"""A chunk's rowid is its doc's id << DOC_SHIFT | its number in the doc."""
ERA_CHUNKS = 4096
"""Chunks of one era of a key (`era_key`)."""


class WriterBusy(Exception):
    """Another process holds Tantivy's writer (`_search_db` raises `IndexBusy` for it)."""


class TextIndexError(sqlite3.DatabaseError):
    """The Tantivy index is missing or damaged (handled as a damaged database: rebuilt)."""


def _schema() -> tantivy.Schema:
    b = tantivy.SchemaBuilder()
    b.add_text_field("terms", tokenizer_name=_ANALYZER, index_option="position")
    b.add_text_field("prefixes", tokenizer_name="whitespace", index_option="basic")
    b.add_text_field("pairs", tokenizer_name="whitespace", index_option="basic")
    b.add_bytes_field("body", stored=True)
    b.add_unsigned_field("rowid", stored=True, fast=True)
    b.add_unsigned_field("start_line", stored=True)
    b.add_unsigned_field("fpos", stored=True)
    b.add_unsigned_field("flen", stored=True)
    b.add_unsigned_field("line_offset", stored=True)
    b.add_unsigned_field("doc", indexed=True)
    b.add_unsigned_field("off", stored=True, indexed=True)
    b.add_unsigned_field("ts", indexed=True, fast=True)
    b.add_text_field("key", tokenizer_name="raw", index_option="basic")
    b.add_text_field("era", tokenizer_name="raw", index_option="basic")
    for name in _RAW:
        b.add_text_field(name, stored=name == "path", tokenizer_name="raw")
    return b.build()


_CJK_CLASS = (
    r"\x{3040}-\x{30ff}\x{3400}-\x{4dbf}\x{4e00}-\x{9fff}\x{ac00}-\x{d7af}\x{f900}-\x{faff}"
    r"\x{ff66}-\x{ff9f}\x{20000}-\x{2fa1f}\x{1100}-\x{11ff}\x{3130}-\x{318f}"
)  # `_search_text._CJK`, and the Hangul letters a folded syllable is made of
_CJK_PAIR = re.compile(f"(?:{_CJK}|[\u1100-\u11ff\u3130-\u318f]){{2}}")
"""Two characters of `_CJK_CLASS` (`_search_text._CJK` and the Hangul letters)."""
ANALYZER = (
    tantivy.TextAnalyzerBuilder(
        tantivy.Tokenizer.regex(rf"[{_CJK_CLASS}]|[[\p{{L}}\p{{N}}]--[{_CJK_CLASS}]]+")
    )
    .filter(tantivy.Filter.lowercase())
    .build()
)
"""How Tantivy splits a chunk's ``terms`` and a query's words (in Rust: indexing speed): each
CJK character alone, else runs of letters and digits, lower-cased, no length limit, of the
text `_search_text.folded` gives (diacritics removed). These are our tokens
(`_search_text.tokens`), except that a CJK character beside a letter is a token of its own
(found inside a mixed word) and a Hangul syllable is searched as its letters."""


def chunk_terms(text: str) -> str:
    """What the ``terms`` field is given for the chunk `text` (see `ANALYZER`)."""
    return text if text.isascii() else folded(text)


def chunk_prefixes(words: list[str]) -> str:
    """What the ``prefixes`` field is given for a chunk whose ``terms`` are the tokens
    `words`: the distinct prefixes of its tokens, of 1 to `PREFIX_CHARS` characters, a space
    between two (a token holds no space)."""
    return " ".join({w[:k] for w in set(words) for k in range(1, min(len(w), PREFIX_CHARS) + 1)})


def chunk_pairs(words: list[str]) -> str:
    """What the ``pairs`` field is given for a chunk whose ``terms`` are the tokens `words`:
    each two tokens in a row that are CJK characters, as one term (`cjk_pairs`)."""
    return " ".join(set(cjk_pairs(words)))


def cjk_pairs(words: list[str]) -> list[str]:
    """The pairs of tokens in a row of `words` that are both a CJK character (a token of its
    own: `ANALYZER`), each as one string. A phrase of CJK characters is in a chunk only if
    every pair of it is: a query asks for its pairs too, whose chunks are far fewer than each
    character's (bigrams, as Lucene's ``CJKBigramFilter`` indexes them), so that they lead
    the intersection and the phrase's positions are read in those chunks only."""
    return [a + b for a, b in itertools.pairwise(words) if _CJK_PAIR.fullmatch(a + b)]


def query_tokens(text: str) -> list[str]:
    """The tokens of a query's word or phrase as the ``terms`` field holds them."""
    return [str(token) for token in ANALYZER.analyze(chunk_terms(text))]


def _register(index: tantivy.Index) -> tantivy.Index:
    index.register_tokenizer(_ANALYZER, ANALYZER)
    return index


def create_index(path: Path) -> None:
    """Create an empty Tantivy index in the new directory `path`."""
    path.mkdir(mode=0o700)
    tantivy.Index(_schema(), path=str(path), reuse=False)
    tighten(path)


def tighten(path: Path) -> None:
    """Make the text index's directory and files private (``0700``/``0600``: Tantivy makes
    its files with the process's umask). Best effort."""
    for entry in [path, *(Path(e.path) for e in os.scandir(path))]:
        try:
            info = os.lstat(entry)
            if info.st_mode & 0o077 and (stat.S_ISDIR(info.st_mode) or stat.S_ISREG(info.st_mode)):
                os.chmod(entry, stat.S_IMODE(info.st_mode) & ~0o077)
        except OSError:
            continue


def is_panic(exc: BaseException) -> bool:
    """Whether `exc` is a Rust panic raised through pyo3 (``pyo3_runtime.PanicException``: a
    `BaseException`, so that ``except Exception`` lets it through; Tantivy panics on some
    damaged files). Nothing else is: not `KeyboardInterrupt`, `SystemExit`,
    `asyncio.CancelledError` or `GeneratorExit`."""
    kind = type(exc)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


def open_index(path: Path) -> tantivy.Index:
    """The Tantivy index at `path`.

    Raises:
        TextIndexError: missing or damaged.
    """
    if not (path / "meta.json").is_file():
        raise TextIndexError(f"no such text index {path.name!r}")
    try:
        tighten(path)
        index = tantivy.Index.open(str(path))
        # Reloaded only by `_search_guard.MappedFiles.check`, which stamps the files first: by
        # default a thread of Tantivy's polls ``meta.json`` and reloads the reader on a commit
        # of its own accord, mapping and reading new segments no check saw. A file damaged
        # meanwhile killed the worker with SIGBUS there (the damage harness, now and then
        # under load: tests/stores/test_search_damage.py).
        index.config_reader(reload_policy="manual")
        return _register(index)
    except ValueError as exc:
        raise TextIndexError(f"text index {path.name!r} is corrupt: {exc}") from exc
    except BaseException as exc:
        if not is_panic(exc):
            raise
        raise TextIndexError(f"text index {path.name!r} is corrupt (Tantivy panicked)") from exc


def ts_digits(stamp: str | None, pad: str = "0") -> int | None:
    """A local time (``YYYY-MM-DD HH:MM:SS``, or a prefix) as the number 14 digits long that
    the ``ts`` field holds, the missing digits `pad`; `None` when it has no digit."""
    if not stamp:
        return None
    digits = "".join(_DIGITS.findall(stamp.replace("T", " ")[:19]))[:14]
    return int(digits.ljust(14, pad)) if digits else None


def owner_value(value: str | None) -> str:
    """An owner column as its field holds it (`NONE` for NULL)."""
    return NONE if value is None else "=" + value


def era_key(agent: str | None, session: str | None, tags: tuple[str, str] | None = None) -> str:
    """The key of the eras of the chunks of an owner (the owner columns, `agent`, `session`):
    its records and the saved outputs named by its own tags, in the order they are written;
    with `tags` (`output_tags`), its saved outputs named by other tags. The chunks a
    ``session``-scope tenant sees are those of its keys (`_search_query`)."""
    return f"{owner_value(agent)}\x1f{owner_value(session)}\x1f{'-'.join(tags or ())}\x1f"


@functools.lru_cache(maxsize=1024)  # asked for each chunk of an output written
def own_tags(agent: str, session: str | None) -> tuple[str, str]:
    """The tenant tags (`output_tags`) of the outputs the owner (`agent`, `session`: as
    stored) names by its own: those of its tenant (`Tenant.tags`; no session is ``""``)."""
    return Tenant(agent, session or "").tags


def chunk_era_key(agent: str | None, session: str | None, tags: tuple[str, str] | None) -> str:
    """The era key (`era_key`) of a chunk owned by `agent` in `session`, of a saved output
    named by `tags` (`output_tags`; `None` for a record): its owner's, with its name's tags
    when they are not its owner's own (`own_tags`). So an owner's records and outputs are
    counted in one key, in the order written, and a tenant's newest eras are its newest
    chunks."""
    if tags is None or (agent is not None and tags == own_tags(agent, session)):
        return era_key(agent, session)
    return era_key(agent, session, tags)


def era_term(key: str, era: int) -> str:
    """The ``era`` term of the chunks of `key` (`era_key`) in its era `era`."""
    return f"{key}{era}"


def output_tags(path: str) -> tuple[str, str]:
    """The tenant tags (agent's, session's) in a saved output's name
    (``tool_result/<agent tag>-<session tag>-...``)."""
    return path[12:28], path[29:45]


def newest_era(searcher: tantivy.Searcher, key: str) -> int:
    """The newest era the index holds of `key` (`era_key`); -1 for none. Eras are filled in
    turn, so it is found by whether each era's term has chunks, doubling then halving (some
    2 log2(eras) term lookups)."""

    def held(era: int) -> bool:
        return searcher.doc_freq("era", era_term(key, era)) > 0

    if not held(0):
        return -1
    high = 1
    while held(high):
        high *= 2
    low = high // 2  # held(low), not held(high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if held(middle) else (low, middle)
    return low


PRELOAD = (".term", ".fieldnorm", ".fast")
"""The files of a segment every search reads some of, whatever its words: its term
dictionary, its field norms (BM25), its fast fields (a hit's ``rowid``). `preload` asks the
kernel to keep them in the page cache."""
PRELOAD_BYTES = 256 << 20
"""At most so many bytes of `PRELOAD` files are asked for, the newest segments' first."""
_ADVICE_BYTES = 8 << 20  # the kernel reads at most its readahead window per advice


def preload(index_dir: Path) -> int:
    """Ask the kernel to read the `PRELOAD` files of the index at `index_dir` into the page
    cache (``posix_fadvise(WILLNEED)``, read in the background; a page already there costs
    nothing), the newest first, up to `PRELOAD_BYTES`; the bytes asked for (0 where the
    system cannot). Called after each commit of the writer: a page of them out of the page
    cache is read from the disk by the search that needs it, at some 0.1-0.5 ms a page on the
    virtual disks this was measured on, and the first search of a word looks it up in every
    segment's term dictionary. Elasticsearch's ``index.store.preload`` does the same. Advice
    never changes what a read returns; a file gone meanwhile (a merged segment) is skipped."""
    if not hasattr(os, "posix_fadvise"):
        return 0
    try:
        entries = [e for e in os.scandir(index_dir) if e.name.endswith(PRELOAD)]
    except OSError:
        return 0  # the index is gone: the next commit asks again
    files = []
    for entry in entries:
        try:
            info = entry.stat()
        except OSError:
            continue  # merged away meanwhile
        files.append((info.st_mtime, info.st_size, entry.path))
    files.sort(reverse=True)
    asked = 0
    for _, size, path in files:
        if asked + size > PRELOAD_BYTES:
            continue
        try:
            fd = os.open(path, os.O_RDONLY)
        except OSError:
            continue
        try:
            for at in range(0, size, _ADVICE_BYTES):
                os.posix_fadvise(fd, at, _ADVICE_BYTES, os.POSIX_FADV_WILLNEED)
            asked += size
        except OSError:
            pass
        finally:
            os.close(fd)
    return asked


_MAPS = Path("/proc/self/maps")


@functools.cache
def _madvise() -> Any:
    """libc's ``madvise``, or `None` where there is no such call."""
    import ctypes

    try:
        call = ctypes.CDLL(None, use_errno=True).madvise
    except (OSError, AttributeError):
        return None
    call.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
    return call


def advise_maps(index_dir: Path, *, random: bool = True) -> int:
    """Advise this process's memory maps of the files in `index_dir` for random access
    (``madvise(MADV_RANDOM)``: how a search reads them), or, `random` false, for the kernel's
    usual readahead (``MADV_NORMAL``: how a merge reads them, in order); the number of maps
    advised (0 where the system cannot).

    A page fault on a cold page of a map is read with the disk's whole readahead window around
    it (``read_ahead_kb``: 8 MB on the virtual disks this was measured on, 128 KB on most
    machines). A search reads a few pages of each segment's postings, positions and stored
    texts: on a cold index of 100k messages and 1 GB of outputs, a first-time search read
    33-105 MB from the disk and took 30-100 ms; advised random, it reads 68-776 KB and takes
    2-11 ms. A merge reads its segments whole: merging 140 MB of cold segments took 3.0 s
    advised random, 1.0 s with readahead, so the writer advises them back while it writes
    (`_search_text_batch`) and the next search advises them random again. Lucene opens its
    files for search so (``ReadAdvice.RANDOM``) and Tantivy can
    (``MmapDirectory::open_with_madvice``), but its Python bindings cannot: the maps are found
    in ``/proc/self/maps`` (Linux). Advice changes how much the kernel reads, never what a read
    returns; a map gone by the time it is advised (a merged segment) fails alone."""
    call = _madvise()
    flag = getattr(mmap, "MADV_RANDOM" if random else "MADV_NORMAL", None)
    if call is None or flag is None:
        return 0
    try:
        maps = _MAPS.read_text(errors="replace")
    except OSError:
        return 0
    prefix = os.path.realpath(index_dir) + os.sep
    advised = 0
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5].startswith(prefix):
            start, end = (int(at, 16) for at in fields[0].split("-"))
            advised += call(start, end - start, flag) == 0
    return advised
