"""The sections of `ContextConfig` (`_config`): `tool_result`, `compactor`, `summarizer`,
`consolidation`, `recall`, `store` and `cache`, each a validated pydantic model (`_Section`: a bad
value raises `ConfigError` naming the field)."""

from __future__ import annotations

import re
from typing import Annotated, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator, model_validator

from ..search._search_text import DEFAULT_HITS, MAX_HITS
from ._config_base import PlainName, _Section
from ._dsn import dsn_problem

__all__ = [
    "CacheConfig",
    "CompactorConfig",
    "ConsolidationConfig",
    "RecallConfig",
    "StoreConfig",
    "SummarizerConfig",
    "ToolResultConfig",
]

SMALL_WINDOW = 8_000
"""Below this prompt budget (tokens) the settings left to it (`None`, or ``"auto"`` for
`ToolResultConfig.mask_after`) take their small-window values (`ContextConfig`): the cost
benchmark's small session, at 4,000 tokens, reads 0.73-0.79 of its prompt tokens from the
providers' caches with them against 0.64-0.67 without (issue 45)."""

MASK_AFTER = 10
"""`ToolResultConfig.mask_after` where it is ``"auto"`` and the budget is `SMALL_WINDOW` or
more."""


class ToolResultConfig(_Section):
    """Two-stage truncation of tool output."""

    recent_n: int = Field(default=5, ge=0)
    """How many of the newest tool-result messages keep the first-truncation excerpt; older
    ones are cut again to `old_max_bytes`. 0 cuts every tool result hard at the next step."""

    recent_max_bytes: int = Field(default=32_768, ge=1_024)
    """UTF-8 size limit of a tool result (excerpt and notice together) when it enters the
    context. About 8K tokens of English text."""

    old_max_bytes: int = Field(default=4_096, ge=1_024)
    """UTF-8 size limit of a tool result once it has slid out of the newest `recent_n`. Not a
    floor under the budget: when the prompt is still over it, outputs are masked."""

    mask_after: Annotated[int, Field(ge=0)] | Literal["auto"] | None = "auto"
    """Tool results older than the newest `mask_after` tool-result messages are reduced to
    their notice alone (masking; the notice still points at the full output) when the prompt
    passes the trigger, and under pressure all but the newest are, before any model
    compaction. `None` masks nothing. A value below `recent_n` counts as `recent_n`.
    ``"auto"`` (the default): 10 where the prompt budget is `SMALL_WINDOW` (8,000 tokens) or
    more; below it, nothing, and the ladder goes from the second truncation straight to
    compaction. There a fresh output may hold 320 tokens (at 4,000, `recent_max_share`
    0.08) and its notice holds 100-170 of them, so masking one frees little, while it breaks
    the provider's cached prompt from that output on, a few hundred tokens after the summary:
    at 4,000 tokens the small session lost more cache to its masking than to its compactions
    (issue 45, docs/contributors/providers.md)."""

    recent_max_share: float | None = Field(default=0.08, gt=0, le=1)
    """A fresh output's excerpt is also bounded by this share of `max_input_tokens` (tokens
    per byte estimated from the output itself), so that one output cannot force a
    compaction alone. `None`: bytes only.

    The default, 0.08, is about the share `recent_max_bytes` gives at a 128,000-token budget
    (32 KB, some 8,000 tokens of code): the bytes bind above about 100,000 tokens, the share
    below. It also bounds what a provider's prompt cache can read: a call that adds one fresh
    output to a prompt at the trigger reads at most ``1 - share / compact_trigger_ratio`` of
    it from the cache (0.89 here; 0.80 with 0.15, the default until 2026-12-07, which held
    the cost benchmark's stress session at 0.71 of its prompt tokens read against issue 45's
    0.80: 0.82 with 0.08, docs/contributors/providers.md). The rest of an output is a
    `read_file` away (its notice says where)."""

    markdown_recent_max_bytes: int = Field(default=65_536, ge=1_024)
    """`recent_max_bytes` for Markdown sources (`*.md`, `*.markdown`, `protected_globs`,
    `protected_tools`): instructions lose their meaning when cut."""

    markdown_old_max_bytes: int = Field(default=16_384, ge=1_024)
    """`old_max_bytes` for Markdown sources."""

    protected_globs: list[str] = Field(default_factory=lambda: ["SKILL.md", "AGENTS.md"])
    """Extra glob patterns (matched against the whole path and its file name) whose files get
    the Markdown limits, on top of `*.md` and `*.markdown`."""

    protected_tools: list[str] = Field(default_factory=list)
    """Names of tools whose every output gets the Markdown limits."""

    retention_days: float = Field(default=7.0, gt=0)
    """Days a `tool_result/{uuid}.txt` file is kept; an expired file is still kept while a
    message in a live context points to it. `retention.outputs_days`, when set, replaces it
    (0 there: kept forever)."""

    @model_validator(mode="after")
    def _check_limits(self) -> ToolResultConfig:
        pairs = [
            ("old_max_bytes", "recent_max_bytes", "<="),
            ("markdown_recent_max_bytes", "recent_max_bytes", ">="),
            ("markdown_old_max_bytes", "old_max_bytes", ">="),
            ("markdown_old_max_bytes", "markdown_recent_max_bytes", "<="),
        ]
        for left, right, op in pairs:
            a, b = getattr(self, left), getattr(self, right)
            if (op == "<=" and a > b) or (op == ">=" and a < b):
                raise ValueError(f"[{left}] got {a!r}; expected {op} {right} ({b!r})")
        return self

    def masks_after(self, budget: int) -> int | None:
        """`mask_after` at the prompt budget `budget` (``"auto"`` resolved)."""
        if self.mask_after == "auto":
            return MASK_AFTER if budget >= SMALL_WINDOW else None
        return self.mask_after


class CacheConfig(_Section):
    """The providers' prompt caches (docs/providers.md): where the package
    tells a provider that the prompt's stable prefix ends."""

    mode: Literal["auto", "explicit", "off"] = "auto"
    """``auto``: `cache_control` breakpoints where the provider caches only up to an explicit
    mark (Anthropic; Alibaba Model Studio, by its DashScope URL), and a `prompt_cache_key` per
    tenant and session on OpenAI's own API; nothing for other servers. ``explicit``: the
    breakpoints whatever the server (an OpenAI-compatible gateway that honours
    `cache_control`). ``off``: the requests go as AgentScope makes them."""

    ttl: Literal["5m", "1h"] = "5m"
    """How long a breakpoint's cache entry lives, refreshed by each hit (Anthropic: ``1h``
    costs 2x the input price to write instead of 1.25x; Model Studio: ``5m`` only, its marks
    never carry ``1h``). After that long without a model call, Anthropic's cache (and an
    ``explicit`` gateway's) counts as expired: see `cut_when_expired`."""

    cut_when_expired: bool = True
    """At the first model call after the provider's prompt cache expired, apply the cuts
    waiting under the trigger (`clear_at_least`): that call writes the whole prompt anyway,
    and every call after it sends the smaller one. Expired: no call for longer than
    ``ttl`` on Anthropic and behind an ``explicit`` gateway, 5 minutes on Model Studio, 10
    on OpenAI (24 hours where the model asks for ``prompt_cache_retention: 24h``, in a 1.x
    model's ``generate_kwargs`` or a 2.x model's ``extra_body``); never on other servers.
    ``false``: the cuts wait for the trigger everywhere."""


class CompactorConfig(_Section):
    """The Compactor: writes the structured summary that replaces old messages."""

    enabled: bool = True
    """Use the model to summarise. When false, or when no model is given, the deterministic
    extractive summary is used."""

    language: Literal["en", "zh"] = "en"
    """Language of the compactor's prompt and of the summary headings."""

    timeout_seconds: float = Field(default=120.0, gt=0)
    """A compactor call that takes longer is abandoned and the extractive summary is used."""

    max_input_tokens: int | None = Field(default=None, ge=1_000)
    """Input budget of the compactor's own model; `None` means the main `max_input_tokens`.
    Larger histories are summarised in chunks, oldest first. The summary itself is at most a
    quarter of the smaller of this and the main `max_input_tokens`."""

    request: Literal["auto", "prefix", "plain"] = "auto"
    """How the compaction request is built. ``prefix``: the agent's last prompt exactly as
    it was sent (system prompt, messages, tool schemas), then one user message asking for the
    summary, so that a provider's prompt cache serves most of it; used when the compactor's
    model is the agent's and the request fits the compactor's input budget, else ``plain``.
    ``plain``: the compactor's own system prompt and a transcript of the older messages.
    ``auto``: ``prefix`` once the provider has reported cache reads for the agent's prompts
    in this session, else ``plain`` (a provider that caches nothing would bill the whole
    prefix request at full price). See README, "Cheap compaction calls"."""

    carry_max_chars: int = Field(default=4_000, ge=400)
    """Cap, in characters, on what every summary carries by code whoever wrote it (the
    carried block, docs/carried.md): the user's own words, verbatim and newest first, and the
    artifact trail (files read, edited, written; commands and their outcome; the newest
    errors). It is also held to a tenth of `max_input_tokens` (at about 3.5 characters a
    token) when that is smaller."""

    mode: Literal["local", "native"] = "local"
    """``local``: only this package compacts. ``native``: the provider compacts too, where it
    can (Anthropic's ``compact_20260112``; OpenAI Responses' compaction item): its opaque
    block is kept with the session and sent back in place of what it replaced, which is
    saved to `dialog/` first. The local ladder still runs before every call and holds the
    budget; it is all there is where the provider refuses (see docs/providers.md)."""

    native_trigger_ratio: float = Field(default=0.6, gt=0, le=1)
    """In ``native`` mode, the provider compacts when the prompt reaches this share of
    `max_input_tokens` (Anthropic: at least 50,000 tokens, its floor). Below
    `compact_trigger_ratio`, so that the provider compacts before the local ladder must."""


class SummarizerConfig(_Section):
    """The Summarizer: writes long-term notes to `memory/YYYY-MM-DD.md` at compaction."""

    enabled: bool = True
    """Run the Summarizer in the background on the messages compaction evicts (needs a
    model)."""

    max_input_tokens: int = Field(default=8_000, ge=1_000)
    """Cap on the transcript of evicted messages the Summarizer's model is given (its
    instructions, tools and own steps come on top). Tool output is shown as its first and
    last few lines; a batch over the cap is shown more briefly, then without its oldest
    messages."""

    min_batch_tokens: int = Field(default=2_000, ge=0)
    """Evicted messages gather in a batch until it holds this many tokens of conversation that
    is not tool output (or, shown at its briefest, fills half of `max_input_tokens`); then one
    run takes the whole batch.
    What is pending at `ContextManager.close` is summarised then. 0 runs at every
    compaction. At most `max_input_tokens`."""

    @model_validator(mode="after")
    def _check_batch(self) -> SummarizerConfig:
        if self.min_batch_tokens > self.max_input_tokens:
            raise ValueError(
                f"[min_batch_tokens] got {self.min_batch_tokens!r}; expected <= "
                f"max_input_tokens ({self.max_input_tokens!r})"
            )
        return self


class ConsolidationConfig(_Section):
    """The daily job that merges recent daily notes into `memory/MEMORY.md`."""

    enabled: bool = False
    """Run the job in-process, owned by the manager (cron users call `agentscope-ctx
    consolidate` instead)."""

    at: str = "00:00"
    """Time of day, `HH:MM` (24-hour)."""

    timezone: str | None = None
    """IANA time zone of `at` (`"Asia/Shanghai"`); `None` means the machine's local zone."""

    days: int = Field(default=7, ge=1)
    """How many recent daily notes each run merges."""

    @field_validator("at")
    @classmethod
    def _check_at(cls, value: str) -> str:
        match = re.fullmatch(r"(\d{1,2}):(\d{2})", value)
        if not match or int(match[1]) > 23 or int(match[2]) > 59:
            raise ValueError("expected HH:MM, e.g. '00:00' or '23:30'")
        return value

    @field_validator("timezone")
    @classmethod
    def _check_timezone(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                ZoneInfo(value)
            except (ZoneInfoNotFoundError, ValueError):
                raise ValueError(
                    "expected an IANA time zone like 'UTC' or 'Europe/Paris'"
                ) from None
        return value


class RecallConfig(_Section):
    """Search over what left the context: the `search_history` tool and its index."""

    enabled: bool = True
    """Register `search_history` at attach and keep the index (``working_dir/index/``) up to
    date at each save. The index is a cache: deleting it loses nothing."""

    scope: Literal["session", "agent", "shared"] = "session"
    """What `search_history` and `read_file` show the agent (docs/tenants.md):
    ``session``: its own records in its own session; ``agent``: every session of the agent
    (same name, same `user`), and the long-term memory files; ``shared``: every record of
    the store (one user's app on its own store). Another tenant's ref reads as one that does
    not exist. ``own``, the former default, loads as ``agent`` (what it meant)."""

    session: PlainName | None = None
    """This context's session (e.g. the ``session_id`` you give `JSONSession`, or the 2.x app
    server's ``session_id``), written on each record; `None`: the records carry the empty
    session ``""`` (all such contexts of one agent are one session).
    `agentscope-ctx search --session` filters by it. No NUL or lone surrogate."""

    user: PlainName | None = None
    """The end user this context serves (the 2.x app server's ``user_id``); the agent's owner
    key becomes ``user/agent``, so the same agent name of two users
    never shares a record or a long-term memory. `None`: the agent name alone. No NUL or lone
    surrogate."""

    max_hits: int = Field(default=DEFAULT_HITS, ge=1, le=MAX_HITS)
    """Hits per search when the agent does not ask for a number."""

    max_output_bytes: int = Field(default=4_000, ge=500)
    """UTF-8 cap of one `search_history` answer; it is also kept within
    `tool_result.old_max_bytes`, so that an answer is never cut and saved."""

    catch_up_seconds: float = Field(default=10.0, gt=0)
    """Longest a search spends indexing files the index has not seen yet (after a rebuild),
    and waiting for another writer of the index; the rest is searched the next time, and the
    answer says so."""

    eviction_index_max_chars: int = Field(default=1_200, ge=200)
    """Size cap of the eviction index (what was compacted away) shown with the summary."""

    @field_validator("scope", mode="before")
    @classmethod
    def _former_scope(cls, value: object) -> object:
        return "agent" if value == "own" else value


_PG_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class StoreConfig(_Section):
    """Where the dialog, the saved outputs and the search index live."""

    kind: Literal["local", "postgres"] = "local"
    """``local``: files and SQLite under `working_dir`; ``postgres``: one PostgreSQL database
    shared by every worker (needs the ``fleet`` extra)."""

    dsn: str | None = None
    """The PostgreSQL server, without the password: ``postgresql://user@host:5432/db`` or
    ``host=... dbname=... user=...``. Required for ``postgres``. Read by libpq's own parser
    (psycopg must be installed): one holding a password (``password``, ``user:pw@``, however
    encoded) or another secret option is refused (docs/fleet-secrets.md). Never shown: errors
    and the CLI name the store by its schema."""

    password_env: str | None = None
    """Name of the environment variable holding the password; `None`: libpq's own
    ``PGPASSWORD`` (or ``~/.pgpass``). A password is never written in the config."""

    schema_name: str = "agentscope_ctx"
    """The PostgreSQL schema holding the tables (made on first use)."""

    connect_timeout_seconds: float = Field(default=10.0, gt=0)
    """How long a connection attempt may take."""

    retry_seconds: float = Field(default=5.0, ge=0)
    """After a connection attempt failed, how long the store answers "unreachable" at once
    without trying again: an unreachable database then costs one attempt per period, not
    one (of up to `connect_timeout_seconds`) per save or read. 0: try every time."""

    max_connections: int = Field(default=8, ge=2, le=10_000)
    """Most connections this process holds to the database: every manager on the same DSN
    and connection settings shares them, however many sessions it serves. A save or read
    that finds them all in use waits for one, up to `connect_timeout_seconds`, then fails as
    an unreachable database does (the output stays whole, the budget holds). At least 2: the
    consolidation's lock holds one while it reads and writes through another."""

    @model_validator(mode="after")
    def _check_postgres(self) -> StoreConfig:
        # Named "[field] ...": the message never repeats the DSN (it might hold a secret).
        # libpq's own parser reads it (`_dsn`): a secret is found however it is spelled.
        problem = None if self.dsn is None else dsn_problem(self.dsn)
        if problem is not None:
            raise ValueError(problem)
        if self.kind == "postgres" and self.dsn is None:
            raise ValueError("[dsn] is required when kind is 'postgres'")
        if not _PG_SCHEMA.fullmatch(self.schema_name):
            raise ValueError(
                f"[schema_name] got {self.schema_name[:80]!r}; expected a lower-case "
                "identifier (letters, digits, _)"
            )
        if self.password_env is not None and not _ENV_NAME.fullmatch(self.password_env):
            raise ValueError(
                f"[password_env] got {self.password_env[:80]!r}; expected an environment "
                "variable name"
            )
        return self
