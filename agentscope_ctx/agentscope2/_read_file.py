"""`ReadFileTool`: the `read_file` continuation tool as an AgentScope 2.x tool.

The same reader as on 1.x (`agentscope_ctx.recall._read_file.FileReader`: the roots, the excerpt
rule, the notice, the error texts), wrapped in a 2.x `ToolBase`. It is read-only and
answers within the configured `read_roots` only, so it is allowed without asking the user
(a deny rule of the agent's permission engine still applies: the engine checks those first).
"""

from __future__ import annotations

import inspect
from typing import Any

from agentscope.message import TextBlock
from agentscope.permission import PermissionBehavior, PermissionContext, PermissionDecision
from agentscope.tool import ToolBase, ToolChunk

from ..recall._read_file import FileReader

__all__ = ["READ_FILE", "ReadFileTool"]

READ_FILE = "read_file"
"""The tool's name: every truncation notice tells the model to call it."""

_INPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "file_path": {
            "type": "string",
            "description": "absolute, or relative to the working directory.",
        },
        "start_line": {
            "type": "integer",
            "description": "first line, from 1.",
            "default": 1,
        },
        "line_offset": {
            "type": "integer",
            "description": "characters to skip in the first line.",
            "default": 0,
        },
    },
    "required": ["file_path"],
}
"""The same parameters as the 1.x tool. No bounds here: `FileReader` checks the values and
answers a bad one with an error text the model can act on, as on 1.x."""


def _description() -> str:
    """The 1.x tool's description: its docstring up to the arguments."""
    doc = inspect.getdoc(FileReader.read_file) or ""
    return doc.split("\n\nArgs:", 1)[0].replace("\n", " ").strip()


class ReadFileTool(ToolBase):
    """`read_file(file_path, start_line=1, line_offset=0)` for a 2.x `Agent`."""

    name: str = READ_FILE
    is_concurrency_safe: bool = True
    is_read_only: bool = True

    def __init__(self, reader: FileReader) -> None:
        """Args:
        reader: resolves paths against the read roots and cuts what it reads.
        """
        super().__init__()
        self.reader = reader
        self.description = _description()
        self.input_schema = _INPUT_SCHEMA

    async def check_permissions(
        self, tool_input: dict[str, Any], context: PermissionContext
    ) -> PermissionDecision:
        """Always allowed: the reader itself refuses anything outside the read roots."""
        return PermissionDecision(
            behavior=PermissionBehavior.ALLOW,
            message=f"{READ_FILE} reads only below the configured read_roots.",
        )

    async def call(  # type: ignore[override]
        self, file_path: str, start_line: int = 1, line_offset: int = 0
    ) -> ToolChunk:
        """Read on from a position; the answer (an excerpt and notice, or an error text)
        is one text block, as on 1.x."""
        response = await self.reader.read_file(file_path, start_line, line_offset)
        # On 2.x, `FileReader` builds its answer from the 2.x `TextBlock` and `ToolResponse`
        # (same names on both lines); only the text is taken from it.
        text = "".join(block.text for block in response.content if isinstance(block, TextBlock))
        return ToolChunk(content=[TextBlock(text=text)])
