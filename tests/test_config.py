"""ContextConfig: defaults, YAML loading, and one clear error per kind of bad input."""

from __future__ import annotations

from pathlib import Path

import pytest

from agentscope_ctx._config import ContextConfig
from agentscope_ctx._errors import ConfigError

ROOT = Path(__file__).resolve().parents[1]


def test_defaults_are_valid_and_expand_home() -> None:
    config = ContextConfig()
    assert "~" not in str(config.working_dir)
    assert config.keep_recent_ratio < config.compact_trigger_ratio <= 1
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
