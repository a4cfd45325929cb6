"""A model server that cannot be reached is named by its URL, never reported as a prompt the
provider refused (issue 31: a dead server showed as "REJECTED by the provider:
APIConnectionError: Connection error.", and the CLI as "unexpected APIConnectionError")."""

from __future__ import annotations

import socket
from pathlib import Path

import openai
import pytest

from agentscope_ctx._providers import load_models
from agentscope_ctx.cli import _run
from agentscope_ctx.cli._parser import build_parser
from agentscope_ctx.core._unreachable import unreachable
from agentscope_ctx.demo import run_demo


@pytest.fixture
def dead_url() -> str:
    """A loopback port nobody listens on (bound, then closed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


async def test_i31_a_real_connection_error_names_its_url(dead_url: str) -> None:
    client = openai.AsyncOpenAI(base_url=dead_url, api_key="none", max_retries=0)
    with pytest.raises(openai.APIConnectionError) as caught:
        await client.chat.completions.create(model="m", messages=[{"role": "user", "content": "x"}])
    text = unreachable(caught.value)
    assert text is not None and text.startswith(
        f"cannot reach the model server at {dead_url}/chat/completions (APIConnectionError: "
    ), text
    try:  # the URL is found in the cause when the raised error does not carry it
        raise RuntimeError("the reply failed") from caught.value
    except RuntimeError as wrapped:
        assert unreachable(wrapped) == text
    assert unreachable(ConnectionRefusedError(111, "refused"), dead_url) == (
        f"cannot reach the model server at {dead_url} (ConnectionRefusedError: [Errno 111] refused)"
    )
    assert unreachable(ValueError("maximum context length is 8192 tokens")) is None


async def test_i31_the_demo_on_a_dead_server_says_not_sent_and_where(
    dead_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    models = load_models(
        {
            "model": {
                "provider": "openai",
                "model_name": "m",
                "base_url": dead_url,
                "api_key_env": None,
                "client_kwargs": {"max_retries": 0},
            }
        }
    )
    assert models is not None
    if hasattr(models.model, "max_retries"):  # 2.x: the model's own retries, 1 s apart
        models.model.max_retries = 0
    lines: list[str] = []
    with pytest.raises(openai.APIConnectionError) as caught:
        await run_demo("logs", tmp_path / "demo", models=models, out=lines.append)
    shown = "\n".join(lines) + capsys.readouterr().out
    assert f"NOT SENT: cannot reach the model server at {dead_url}/chat/completions" in shown
    assert "REJECTED" not in shown
    assert _fail_line(caught.value, capsys).startswith(
        f"agentscope-ctx: error: cannot reach the model server at {dead_url}"
    )


def _fail_line(exc: BaseException, capsys: pytest.CaptureFixture[str]) -> str:
    """What the CLI prints for `exc` when it ends a command."""

    def fails(_: object) -> int:
        raise exc

    args = build_parser().parse_args(["config"])
    args.func = fails
    assert _run(args) == 1
    return capsys.readouterr().err.strip()
