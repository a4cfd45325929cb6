"""`build_agent`'s errors on the installed line: a bad config is refused before any agent is
made, naming the field (`agentscope_ctx/_agent_config.py`). What each line builds:
`tests/agentscope1/test_providers.py` (1.x), `tests/agentscope2/test_agent_config.py` (2.x)."""

from __future__ import annotations

import pytest

from agentscope_ctx import ConfigError
from agentscope_ctx._agent_config import build_agent

MODEL = {"provider": "openai", "model_name": "m"}


@pytest.mark.parametrize(
    ("data", "field"),
    [
        ({"context": {}}, "model"),
        ({"model": MODEL, "agnet": {}}, "agnet"),
        ({"model": MODEL, "agent": {"tools": ["rm"]}}, "agent.tools"),
        ({"model": MODEL, "agent": {"max_iters": 0}}, "agent.max_iters"),
        ({"model": MODEL, "context": {"max_input_tokens": 10}}, "context.max_input_tokens"),
    ],
)
def test_build_agent_errors_name_the_field(
    data: dict[str, object], field: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "fake-key")
    with pytest.raises(ConfigError) as info:
        build_agent(data)
    assert info.value.field == field
