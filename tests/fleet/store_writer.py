"""A worker process of the contract tests: appends messages and saves outputs to the store a
JSON config names (``python -m tests.fleet.store_writer CONFIG_JSON NAME COUNT``), as one of
the workers serving agent ``a1`` (the contract tests' default agent, no session)."""

from __future__ import annotations

import asyncio
import json
import sys

from agentscope_ctx.core.config._config import ContextConfig
from agentscope_ctx.stores.factory import open_stores
from tests.support.lines import Msg


async def main(config_json: str, name: str, count: int) -> None:
    config = ContextConfig.model_validate(json.loads(config_json))
    stores = open_stores(config, agent="a1")
    try:
        for i in range(count):
            own = Msg("user", f"{name} message {i} worker{name}word", "user")
            own.id = f"{name}-{i}"
            shared = Msg("user", f"shared message {i}", "user")
            shared.id = f"shared-{i}"  # both workers of a1 append it: stored once
            await stores.dialog.append([own, shared])
            if i % 10 == 0:
                ref = stores.outputs.save(f"output {i} of {name}\nzz{name}out{i}\n")
                print(ref, flush=True)
    finally:
        stores.close()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], int(sys.argv[3])))
