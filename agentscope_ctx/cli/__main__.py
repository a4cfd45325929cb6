"""`python -m agentscope_ctx.cli`: the `agentscope-ctx` command."""

import sys

from . import main

sys.exit(main())
