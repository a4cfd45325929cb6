"""The fleet example's index catch-up, as the migration role (docs/tenants.md, "A migration role
and a workers' role"): the workers' role sees only its own tenants' rows, so the search
index's catch-up, which reads every tenant's, runs here, beside the workers.

    . ./fleet-data/env.sh          # from servers.py: MAINTENANCE_CONFIG, CTX_MIGRATE_PASSWORD
    python examples/fleet/indexer.py
"""

from __future__ import annotations

import os
import time

from agentscope_ctx import ContextConfig
from agentscope_ctx.stores.factory import open_stores

stores = open_stores(ContextConfig.from_yaml(os.environ["MAINTENANCE_CONFIG"]))
try:
    while True:
        stores.search.catch_up(seconds=5)  # what the workers saved since, every tenant's
        time.sleep(1)
finally:
    stores.close()
