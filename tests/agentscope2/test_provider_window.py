"""Where AgentScope 2.x users hurt (issue 14, item 5), in a real 2.x `Agent` against a
scripted provider that enforces its window with a real tokenizer (tiktoken):

- 2.x counts bytes / 4, which undercounts Chinese and JSON 2-3x: its own compression fires
  after the provider's window, and the request fails; ours counts tokens and compacts first;
- after a context-length error, ours learns the stated window, compacts, and retries once.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from agentscope.agent import Agent
from agentscope.message import Msg, UserMsg
from agentscope.model import ChatResponse, ChatUsage
from agentscope.tool import FunctionTool, Toolkit

from agentscope_ctx import ContextConfig, ContextManager, TokenCounter
from tests.support.fakes import ALLOW, FakeChatModel, tool_call

WINDOW = 12_000
"""The provider's window (tokens), stated as the model's `context_size`."""


def orders(page: int) -> str:
    """One page of orders, as JSON with Chinese fields (what a database tool returns).

    Args:
        page (int): the page.
    """
    rows = [
        {
            "id": page * 100 + i,
            "名称": f"客户{page}-{i}号",
            "城市": "上海" if i % 2 else "北京",
            "订单": [
                {"sku": f"A{i}-{j}", "数量": j, "价格": round(i * 1.1 + j, 2)} for j in range(3)
            ],
            "备注": "按时交付，质量良好，客户满意",
        }
        for i in range(30)
    ]
    return json.dumps(rows, ensure_ascii=False)


class Provider(FakeChatModel):
    """A scripted provider: counts each prompt with tiktoken (as the provider's tokenizer
    would) and rejects one over `window` with OpenAI's context-length error; otherwise
    answers the next scripted step and reports the prompt's size as usage."""

    def __init__(self, steps: list[ChatResponse], *, window: int, context_size: int) -> None:
        super().__init__(
            [self._answer for _ in steps], default="Report done.", context_size=context_size
        )
        self.window = window
        self.steps = list(steps)
        self.counter = TokenCounter()
        self.sizes: list[int] = []
        self.rejected: list[int] = []

    async def _answer(self, messages: list[Msg]) -> ChatResponse:
        formatted = await self.formatter.format(messages)
        tokens = await self.counter.count(formatted, self.calls[-1]["tools"])
        self.sizes.append(tokens)
        if tokens > self.window:
            self.rejected.append(tokens)
            self.queue.answers.insert(0, self._answer)  # the step is still to come
            raise RuntimeError(
                f"Error code: 400 - This model's maximum context length is {self.window} "
                f"tokens. However, your messages resulted in {tokens} tokens."
            )
        step = self.steps.pop(0)
        return ChatResponse(
            content=list(step.content),
            is_last=True,
            usage=ChatUsage(input_tokens=tokens, output_tokens=5, time=0.0),
        )


def _steps(n: int) -> list[ChatResponse]:
    return [tool_call("orders", f"c{page}", page=page) for page in range(n)]


def _agent(model: Provider, **kwargs: Any) -> Agent:
    toolkit = Toolkit(tools=[FunctionTool(orders, permission=ALLOW, is_read_only=True)])
    return Agent(
        name="clerk", system_prompt="You total orders.", model=model, toolkit=toolkit, **kwargs
    )


def _config(tmp_path: Path, **fields: Any) -> ContextConfig:
    return ContextConfig.model_validate(
        {
            "working_dir": str(tmp_path / "ctx"),
            "summarizer": {"enabled": False},
            # compaction is the subject: no masking relief before it
            "tool_result": {"mask_after": None, "recent_max_share": None},
            **fields,
        }
    )


async def test_i14_05_builtin_bytes_over_4_overflows_where_ours_compacts_first(
    tmp_path: Path,
) -> None:
    # AgentScope 2.x alone: its bytes/4 count says the prompt is far below its trigger
    # (0.8 x context_size) while the provider's tokenizer says it is over the window.
    builtin = Provider(_steps(10), window=WINDOW, context_size=WINDOW)
    with pytest.raises(RuntimeError, match="maximum context length"):
        await _agent(builtin).reply(UserMsg(name="user", content="Total all pages."))
    assert builtin.rejected, builtin.sizes
    estimate = await builtin.count_tokens(builtin.calls[-1]["messages"], builtin.calls[-1]["tools"])
    assert estimate < 0.8 * WINDOW < builtin.rejected[0]  # bytes/4 never saw it coming

    # The same session with agentscope_ctx: the budget is the model's context_size, counted
    # in tokens; compaction fires before the window, and no request is rejected.
    ours = Provider(_steps(10), window=WINDOW, context_size=WINDOW)
    manager = ContextManager(_config(tmp_path), model=FakeChatModel(default="## Goal\n- total"))
    agent = _agent(ours, middlewares=[manager.middleware()])
    reply = await agent.reply(UserMsg(name="user", content="Total all pages."))
    assert reply.content and not ours.rejected, ours.sizes
    assert max(ours.sizes) <= WINDOW
    assert manager.dialog.ids(), "compaction moved the older pages to dialog/"
    assert str(agent.state.summary)
    await manager.close()


async def test_i14_05_overflow_is_recovered_and_the_stated_window_kept(tmp_path: Path) -> None:
    # The model states no window (2.x's default context_size) and ours is configured too
    # large: the first over-window request fails; one emergency compaction, one retry.
    provider = Provider(_steps(10), window=WINDOW, context_size=128_000)
    manager = ContextManager(
        _config(tmp_path, max_input_tokens=40_000), model=FakeChatModel(default="## Goal\n- x")
    )
    agent = _agent(provider, middlewares=[manager.middleware()])
    reply = await agent.reply(UserMsg(name="user", content="Total all pages."))
    assert reply.content
    assert len(provider.rejected) == 1, provider.rejected
    usage = await manager.context_usage(agent)
    assert usage.max_input_tokens <= WINDOW  # learnt from the error, kept for the session
    assert agent.state.middle_context["agentscope_ctx"]["calibration"]
    await manager.close()
