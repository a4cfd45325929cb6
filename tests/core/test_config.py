"""ContextConfig: defaults, YAML loading, and one clear error per kind of bad input."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from agentscope_ctx._providers import load_models
from agentscope_ctx.core._errors import MAX_CONFIG_MESSAGE_CHARS, ConfigError
from agentscope_ctx.core.config import _config_file
from agentscope_ctx.core.config._config import ConsolidationConfig, ContextConfig, ToolResultConfig
from agentscope_ctx.core.config._config_file import MAX_CONFIG_BYTES, MAX_CONFIG_NODES
from tests.support.lines import requires_1x

agent_config = requires_1x("build_agent makes a ReActAgent")


def build_agent(source: Path | dict[str, object]) -> object:
    """`agentscope_ctx.build_agent`, imported where it runs (AgentScope 1.x)."""
    from agentscope_ctx._agent_config import build_agent as build

    return build(source)


ROOT = Path(__file__).resolve().parents[2]


def test_defaults_are_valid_and_expand_home() -> None:
    config = ContextConfig()
    assert "~" not in str(config.working_dir)
    assert config.keep_recent_ratio < config.trigger_ratio(config.max_input_tokens) <= 1
    assert config.tool_result.old_max_bytes <= config.tool_result.recent_max_bytes


def test_bundled_yaml_loads_and_matches_defaults() -> None:
    loaded = ContextConfig.from_yaml(ROOT / "configs" / "default.yaml")
    assert loaded.model_dump(exclude={"working_dir"}) == ContextConfig().model_dump(
        exclude={"working_dir"}
    )


def test_every_field_is_documented_in_default_yaml() -> None:
    text = (ROOT / "configs" / "default.yaml").read_text()
    for name, field in ContextConfig.model_fields.items():
        assert f"{name}:" in text, name
        sub = getattr(field.annotation, "model_fields", {})
        for child in sub:
            assert f"  {child}:" in text, f"{name}.{child}"


def test_the_small_window_room_follows_the_fresh_outputs_share() -> None:
    """`compact_headroom: null` leaves 0.5 of a small budget free after a compaction,
    counted in fresh outputs at `tool_result.recent_max_share` (issue 45): 6 at the default
    0.08 (4 until the trigger went to the budget there, which compacted again after three
    calls), 3 at 0.15, 2 with no share or a larger one; never at or above `SMALL_WINDOW`,
    and an explicit value is kept."""
    assert ContextConfig().headroom(4_000) == 6
    assert ContextConfig(tool_result={"recent_max_share": 0.15}).headroom(4_000) == 3
    assert ContextConfig(tool_result={"recent_max_share": None}).headroom(4_000) == 2
    assert ContextConfig(tool_result={"recent_max_share": 0.5}).headroom(4_000) == 2
    assert ContextConfig().headroom(8_000) is None
    assert ContextConfig(compact_headroom=3).headroom(4_000) == 3
    assert ContextConfig(compact_headroom=0).headroom(4_000) is None


def test_a_small_window_compacts_at_the_budget_and_masks_nothing() -> None:
    """Left to the budget (issue 45), the trigger is 0.75 from `SMALL_WINDOW` up and the
    budget itself below it, and masking starts after 10 outputs from `SMALL_WINDOW` up and
    not at all below it; a value given is kept at any budget, and a bad one is refused
    naming the field."""
    config = ContextConfig()
    assert config.compact_trigger_ratio is None and config.tool_result.mask_after == "auto"
    assert (config.trigger_ratio(7_999), config.trigger_ratio(8_000)) == (1.0, 0.75)
    assert ContextConfig(compact_trigger_ratio=0.75).trigger_ratio(4_000) == 0.75
    assert ContextConfig(compact_trigger_ratio=0.9).trigger_ratio(128_000) == 0.9
    results = config.tool_result
    assert (results.masks_after(7_999), results.masks_after(8_000)) == (None, 10)
    assert ContextConfig(tool_result={"mask_after": 10}).tool_result.masks_after(4_000) == 10
    assert ContextConfig(tool_result={"mask_after": None}).tool_result.masks_after(8_000) is None
    for bad in ("always", -1):
        with pytest.raises(ConfigError, match=r"tool_result\.mask_after"):
            ContextConfig(tool_result={"mask_after": bad})
    with pytest.raises(ConfigError, match=r"keep_recent_ratio.*0\.75"):
        ContextConfig(keep_recent_ratio=0.8)


def test_yaml_working_dir_expands_user(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("working_dir: ~/somewhere\n")
    assert ContextConfig.from_yaml(path).working_dir == Path.home() / "somewhere"


def test_empty_yaml_gives_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("")
    assert ContextConfig.from_yaml(path).max_input_tokens == 128_000


def test_agent_config_section_is_accepted(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("context:\n  max_input_tokens: 50000\n")
    assert ContextConfig.from_yaml(path).max_input_tokens == 50_000


@pytest.mark.parametrize(
    ("fields", "field", "fragment"),
    [
        ({"max_input_tokens": "lots"}, "max_input_tokens", "'lots'"),
        ({"max_input_tokens": 10}, "max_input_tokens", "10"),
        ({"compact_trigger_ratio": 1.5}, "compact_trigger_ratio", "1.5"),
        ({"keep_recent_ratio": 0}, "keep_recent_ratio", "0"),
        ({"keep_recent_ratio": 0.8}, "keep_recent_ratio", "compact_trigger_ratio"),
        ({"surprise": 1}, "surprise", "unknown"),
        ({"tool_result": {"recent_n": -1}}, "tool_result.recent_n", "-1"),
        ({"tool_result": {"old_max_bytes": 40_000}}, "tool_result.old_max_bytes", "40000"),
        (
            {"tool_result": {"markdown_recent_max_bytes": 2_048}},
            "tool_result.markdown_recent_max_bytes",
            "2048",
        ),
        (
            {"tool_result": {"markdown_old_max_bytes": 2_048}},
            "tool_result.markdown_old_max_bytes",
            "2048",
        ),
        ({"tool_result": {"retention_days": 0}}, "tool_result.retention_days", "0"),
        ({"tool_result": {"typo": 1}}, "tool_result.typo", "unknown"),
        ({"compactor": {"language": "fr"}}, "compactor.language", "'fr'"),
        ({"consolidation": {"at": "25:00"}}, "consolidation.at", "'25:00'"),
        ({"consolidation": {"timezone": "Mars/Base"}}, "consolidation.timezone", "Mars/Base"),
        ({"token_counter": " "}, "token_counter", "' '"),
    ],
)
def test_bad_values_name_the_field(fields: dict, field: str, fragment: str) -> None:
    with pytest.raises(ConfigError) as info:
        ContextConfig(**fields)
    assert info.value.field == field
    assert repr(field) in str(info.value) and fragment in str(info.value)


def test_bad_value_in_yaml_names_the_field(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("tool_result:\n  old_max_bytes: 999999\n")
    with pytest.raises(ConfigError, match=r"'tool_result\.old_max_bytes'.*999999"):
        ContextConfig.from_yaml(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="does not exist"):
        ContextConfig.from_yaml(tmp_path / "nope.yaml")


def test_yaml_syntax_error(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("max_input_tokens: [1, 2\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        ContextConfig.from_yaml(path)


def test_yaml_not_a_mapping(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("- a\n- b\n")
    with pytest.raises(ConfigError, match="mapping"):
        ContextConfig.from_yaml(path)


# -- issue 11, item 14: every bad config is a short, fast ConfigError ----------------------


def _billion_laughs(levels: int) -> str:
    """A YAML bomb: each level is a list of 9 aliases of the level below."""
    lines = ["l0: &l0 [" + ",".join(["lol"] * 9) + "]"]
    lines += [f"l{i}: &l{i} [" + ",".join([f"*l{i - 1}"] * 9) + "]" for i in range(1, levels)]
    return "\n".join(lines) + f"\nworking_dir: *l{levels - 1}\n"


BOMB = _billion_laughs(8)
"""400 bytes, 9**8 (43 million) "lol"s once its aliases are expanded."""


@pytest.fixture(params=["libyaml", "python"])
def loader(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Run a test with each YAML parser the loader may use (libyaml when installed)."""
    if request.param == "libyaml":
        if not yaml.__with_libyaml__:
            pytest.skip("PyYAML without libyaml")
        monkeypatch.setattr(_config_file, "_LOADER", yaml.CSafeLoader)
    else:
        monkeypatch.setattr(_config_file, "_LOADER", yaml.SafeLoader)


def _load_error(tmp_path: Path, text: str) -> ConfigError:
    path = tmp_path / "c.yaml"
    path.write_text(text, encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        ContextConfig.from_yaml(path)
    assert len(str(info.value)) <= MAX_CONFIG_MESSAGE_CHARS
    return info.value


def test_i11_14_yaml_bomb_is_refused_with_a_short_message(tmp_path: Path, loader: None) -> None:
    assert len(BOMB) <= 400
    error = _load_error(tmp_path, BOMB)
    assert f"more than {MAX_CONFIG_NODES} YAML nodes" in str(error)
    assert error.field and repr(error.field) in str(error)


@agent_config
def test_i11_14_yaml_bomb_in_an_agent_config_is_refused(tmp_path: Path, loader: None) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("context:\n" + "".join(f"  {line}\n" for line in BOMB.splitlines()))
    with pytest.raises(ConfigError, match="YAML nodes") as info:
        build_agent(path)
    assert len(str(info.value)) <= MAX_CONFIG_MESSAGE_CHARS


def test_aliases_within_the_budget_load(tmp_path: Path, loader: None) -> None:
    path = tmp_path / "c.yaml"
    path.write_text(
        "tool_result:\n  protected_globs: &names [SKILL.md, NOTES.md]\n  protected_tools: *names\n"
    )
    config = ContextConfig.from_yaml(path)
    assert config.tool_result.protected_tools == ["SKILL.md", "NOTES.md"]


@pytest.mark.parametrize(
    ("text", "field", "fragment"),
    [
        ("a: " + "[" * 5000 + "]" * 5000 + "\n", None, ""),
        (
            "tool_result:\n  protected_globs: " + "[" * 31 + "]" * 31 + "\n",
            "tool_result.protected_globs." + ".".join(["0"] * 30),
            "nested more than 32 levels",
        ),
        (
            "a: &deep " + "[" * 20 + "]" * 20 + "\nread_roots: " + "[" * 15 + "*deep"
            + "]" * 15 + "\n",
            "read_roots." + ".".join(["0"] * 15),
            "nested more than 32 levels",
        ),
        ("read_roots: &a [*a]\n", "read_roots.0", "alias *a inside its own anchor"),
    ],
)  # fmt: skip
def test_i11_14_deep_or_recursive_yaml_is_a_config_error(
    tmp_path: Path, loader: None, text: str, field: str | None, fragment: str
) -> None:
    error = _load_error(tmp_path, text)
    if field is not None:
        assert error.field == field
    assert fragment in str(error)


def test_nesting_up_to_the_limit_is_validated_as_usual(tmp_path: Path) -> None:
    error = _load_error(tmp_path, "tool_result:\n  protected_globs: " + "[" * 30 + "]" * 30)
    assert error.field == "tool_result.protected_globs.0"
    assert "nested" not in str(error)


def test_i11_14_deeply_nested_python_value_is_a_config_error() -> None:
    nested: list[object] = []
    for _ in range(5000):
        nested = [nested]
    with pytest.raises(ConfigError) as info:
        ContextConfig(read_roots=nested)
    assert info.value.field == "read_roots.0"
    assert len(str(info.value)) <= MAX_CONFIG_MESSAGE_CHARS


def test_i11_14_too_large_file_is_refused(tmp_path: Path) -> None:
    error = _load_error(tmp_path, "#" * MAX_CONFIG_BYTES + "\n")
    assert "too large" in str(error) and error.field is None


@pytest.mark.parametrize(
    ("fields", "field", "fragment"),
    [
        ({"working_dir": "a\x00b"}, "working_dir", "NUL"),
        ({"working_dir": "a\ud800b"}, "working_dir", "encode"),
        ({"working_dir": "~no_such_user_agentscope_ctx/x"}, "working_dir", "home"),
        ({"read_roots": [".", "x\x00"]}, "read_roots.1", "NUL"),
        ({"read_roots": ["~no_such_user_agentscope_ctx"]}, "read_roots.0", "home"),
    ],
)
def test_i11_14_invalid_paths_are_refused(
    fields: dict[str, object], field: str, fragment: str
) -> None:
    with pytest.raises(ConfigError) as info:
        ContextConfig(**fields)
    assert info.value.field == field and fragment in str(info.value)


def test_i11_14_nul_in_yaml_working_dir_is_refused(tmp_path: Path) -> None:
    error = _load_error(tmp_path, 'working_dir: "/tmp/a\\0b"\n')
    assert error.field == "working_dir" and "NUL" in str(error)


def _assign(target: object, name: str, value: object) -> None:
    setattr(target, name, value)


@pytest.mark.parametrize(
    ("build", "field"),
    [
        (lambda: ToolResultConfig(recent_n=-1), "recent_n"),
        (lambda: ToolResultConfig.model_validate({"recent_n": -1}), "recent_n"),
        (lambda: ContextConfig.model_validate({"max_input_tokens": -1}), "max_input_tokens"),
        (
            lambda: ContextConfig.model_validate({"tool_result": {"recent_n": -1}}),
            "tool_result.recent_n",
        ),
        (lambda: ContextConfig.model_validate_json('{"max_input_tokens": -1}'), "max_input_tokens"),
        (lambda: ContextConfig.model_validate_json("[" * 1000), None),
        (lambda: ContextConfig.model_validate_strings({"memory_max_tokens": "x"}), "memory_max_tokens"),
        (lambda: ConsolidationConfig.model_validate({"at": "7pm"}), "at"),
        (lambda: ContextConfig.model_validate(5), None),
        (lambda: ContextConfig.model_validate({1: 2}), "1"),
        (lambda: _assign(ContextConfig(), "max_input_tokens", -1), "max_input_tokens"),
        (lambda: _assign(ContextConfig().tool_result, "recent_n", -1), "recent_n"),
        (lambda: _assign(ContextConfig(), "working_dir", "a\x00"), "working_dir"),
        (lambda: _assign(ContextConfig(), "surprise", 1), "surprise"),
    ],
)  # fmt: skip
def test_i11_14_every_way_in_raises_config_error(
    build: Callable[[], object], field: str | None
) -> None:
    with pytest.raises(ConfigError) as info:
        build()
    assert info.value.field == field
    assert field is None or repr(field) in str(info.value)


def test_model_validate_json_accepts_the_defaults() -> None:
    assert ContextConfig.model_validate_json("{}") == ContextConfig()


def test_i11_14_failed_assignment_leaves_the_config_unchanged() -> None:
    config = ContextConfig()
    with pytest.raises(ConfigError, match="compact_trigger_ratio"):
        config.keep_recent_ratio = 0.9
    with pytest.raises(ConfigError, match="recent_max_bytes"):
        config.tool_result.old_max_bytes = 10**6
    assert config == ContextConfig() and not config.model_fields_set
    config.keep_recent_ratio = 0.5
    assert config.keep_recent_ratio == 0.5 and config.model_fields_set == {"keep_recent_ratio"}


@pytest.mark.parametrize(
    "fields",
    [
        {"token_counter": " " * 1_000_000},
        {"max_input_tokens": "9" * 1_000_000},
        {"k" * 100_000: 1},
        {"tool_result": {"protected_globs": [[["x" * 10_000] * 1000] * 10]}},
        {"consolidation": {"timezone": "Mars/" * 10_000}},
    ],
)
def test_i11_14_messages_are_bounded(fields: dict[str, object]) -> None:
    with pytest.raises(ConfigError) as info:
        ContextConfig(**fields)
    assert info.value.field and len(str(info.value)) <= MAX_CONFIG_MESSAGE_CHARS


def test_i11_14_message_about_a_long_path_is_bounded(tmp_path: Path) -> None:
    path = tmp_path.joinpath(*["d" * 200] * 10, "c.yaml")
    with pytest.raises(ConfigError, match="does not exist") as info:
        ContextConfig.from_yaml(path)
    assert len(str(info.value)) <= MAX_CONFIG_MESSAGE_CHARS


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{1: 2}\n", "1"),
        ("null: 3\n", "None"),
        ("true: x\n", "True"),
        ("1.5: x\n", "1.5"),
        ("tool_result: {1: 2}\n", "tool_result.1"),
        ("context: {7: 2}\n", "context.7"),
    ],
)
def test_i11_14_non_string_keys_are_config_errors(tmp_path: Path, text: str, field: str) -> None:
    error = _load_error(tmp_path, text)
    assert error.field == field and "expected a field name" in str(error)


@pytest.mark.parametrize("value", ["5", "[1]", "x", "true"])
def test_i11_14_context_section_must_be_a_mapping(tmp_path: Path, value: str) -> None:
    error = _load_error(tmp_path, f"context: {value}\n")
    assert error.field == "context" and "expected a mapping" in str(error)


def test_i11_14_empty_context_section_gives_defaults(tmp_path: Path) -> None:
    path = tmp_path / "c.yaml"
    path.write_text("context:\nmodel: {provider: openai, model_name: m}\n")
    assert ContextConfig.from_yaml(path) == ContextConfig()


def test_i11_14_fields_beside_context_are_refused(tmp_path: Path) -> None:
    error = _load_error(tmp_path, "context: {}\nmax_input_tokens: 5000\n")
    assert error.field == "max_input_tokens" and "beside 'context'" in str(error)


def test_i11_14_fields_under_context_are_named_from_the_top(tmp_path: Path) -> None:
    error = _load_error(tmp_path, "context:\n  tool_result:\n    recent_n: -1\n")
    assert error.field == "context.tool_result.recent_n"
    assert "'context.tool_result.recent_n'" in str(error)


@agent_config
@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"context": {1: 2}}, "context.1"),
        ({"agent": {None: 2}}, "agent.None"),
        ({"context": 0}, "context"),
    ],
)
def test_i11_14_build_agent_sections_give_config_errors(
    data: dict[str, object], field: str
) -> None:
    with pytest.raises(ConfigError) as info:
        build_agent(data)
    assert info.value.field == field and repr(field) in str(info.value)


@pytest.mark.parametrize("path", ["a\x00b.yaml", "~no_such_user_agentscope_ctx/c.yaml"])
def test_i11_14_unusable_config_path_is_a_config_error(path: str) -> None:
    with pytest.raises(ConfigError, match="cannot be read"):
        ContextConfig.from_yaml(path)


def test_i11_14_yaml_bomb_in_a_model_config_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "model.yaml"
    path.write_text(BOMB.replace("working_dir:", "model:\n  provider: openai\n  model_name:"))
    with pytest.raises(ConfigError, match="YAML nodes") as info:
        load_models(path)
    assert len(str(info.value)) <= MAX_CONFIG_MESSAGE_CHARS


def test_i20_5_a_working_dir_that_cannot_be_a_directory_is_refused(tmp_path: Path) -> None:
    """Before: accepted, and every save then failed (logged, degraded) for the whole session."""
    a_file = tmp_path / "a_file"
    a_file.write_text("x")
    for bad, where in ((a_file, "it exists"), (a_file / "sub" / "wd", f"{str(a_file)!r} above it")):
        with pytest.raises(ConfigError, match=f"expected a directory.*; {where}") as info:
            ContextConfig(working_dir=bad)
        assert info.value.field == "working_dir"
        config_file = tmp_path / "c.yaml"
        config_file.write_text(yaml.safe_dump({"working_dir": str(bad)}), encoding="utf-8")
        with pytest.raises(ConfigError, match="expected a directory") as info:
            ContextConfig.from_yaml(config_file)
        assert info.value.field == "working_dir"
    config = ContextConfig(working_dir=tmp_path)
    with pytest.raises(ConfigError, match="working_dir"):
        config.working_dir = a_file
    assert config.working_dir == tmp_path
    assert ContextConfig(working_dir=tmp_path / "new" / "deeper").working_dir.parent.name == "new"


# -- issue 31: a mistyped field gets a "did you mean" ------------------------------------------


def _set_later(field: str, value: object) -> Callable[[], object]:
    def run() -> object:
        config = ContextConfig()
        section, _, name = field.rpartition(".")
        setattr(getattr(config, section) if section else config, name, value)
        return config

    return run


@pytest.mark.parametrize(
    ("build", "message"),
    [
        (lambda: ContextConfig(max_input_token=9000), "did you mean 'max_input_tokens'?"),
        (
            lambda: ContextConfig(tool_result={"recent_max_byte": 9000}),
            "'tool_result.recent_max_byte'; did you mean 'tool_result.recent_max_bytes'?",
        ),
        (
            lambda: ContextConfig.model_validate({"compactr": {}}),
            "'compactr'; did you mean 'compactor'?",
        ),
        (lambda: ToolResultConfig(recentn=3), "'recentn'; did you mean 'recent_n'?"),
        (_set_later("keep_recent_ration", 0.2), "did you mean 'keep_recent_ratio'?"),
        (_set_later("tool_result.retention_day", 2), "did you mean 'retention_days'?"),
    ],
)
def test_i31_a_mistyped_field_gets_a_suggestion(build: Callable[[], object], message: str) -> None:
    with pytest.raises(ConfigError, match="unknown config field") as caught:
        build()
    assert str(caught.value).endswith(message), caught.value


def test_i31_suggestions_in_yaml_and_none_when_nothing_is_close(tmp_path: Path) -> None:
    path = tmp_path / "agent.yaml"
    path.write_text("context:\n  store:\n    kindd: postgres\n", encoding="utf-8")
    with pytest.raises(ConfigError) as caught:
        ContextConfig.from_yaml(path)
    assert str(caught.value) == (
        "unknown config field 'context.store.kindd'; did you mean 'context.store.kind'?"
    )
    assert caught.value.field == "context.store.kindd"
    with pytest.raises(ConfigError) as caught:
        ContextConfig(zzz=1)
    assert str(caught.value) == "unknown config field 'zzz'"
