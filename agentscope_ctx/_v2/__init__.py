"""The AgentScope 2.x adapter (prototype: issue 14, phase 1).

`ContextMiddleware` brings the lossless first truncation of tool output and the `read_file`
tool to a 2.x `Agent` as a native middleware; the rest of the 1.x adapter (the pre-reasoning
pipeline, the dialog store, compaction, calibration, overflow recovery) is still to come
(see `docs/agentscope2.md`). Importing this package needs AgentScope 2.x.
"""

from .._line import AGENTSCOPE_VERSION, IS_1X

if IS_1X:
    raise ImportError(
        f"agentscope_ctx._v2 needs AgentScope 2.x; AgentScope {AGENTSCOPE_VERSION} is "
        "installed (on 1.x, use agentscope_ctx.ContextManager)"
    )

from ._middleware import ContextMiddleware  # after the line check
from ._read_file import READ_FILE, ReadFileTool

__all__ = ["READ_FILE", "ContextMiddleware", "ReadFileTool"]
