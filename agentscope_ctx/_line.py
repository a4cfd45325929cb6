"""Which AgentScope line is installed: 1.x (`ReActAgent`, hooks, `MemoryBase`, `Msg` with
TypedDict blocks) or 2.x (`Agent`, middlewares, `AgentState`, pydantic `Msg` and blocks).

Both lines export ``agentscope.__version__``; nothing else names the line as cheaply (the
module layouts differ: 1.x has ``agentscope.memory`` and ``agentscope.token``, 2.x has
``agentscope.middleware`` and ``agentscope.state``). A 0.x or 3.x AgentScope counts as 2.x:
the code for the newest line is the better guess, and it fails loudly where it does not fit.

AgentScope 1.0.21 installed alone does not import: it needs `mcp<2` (mcp 2 removed
`streamablehttp_client`), `greenlet` and `tqdm`, which it does not declare so that a fresh
install gets them. Those fixes are the `agentscope1` extra of this package (a plain install takes
the newest AgentScope, 2.x). So when AgentScope does not import and the installed distribution
is a 1.x release and the failure names one of them, the `ImportError` raised here says to
install the extra from the clone, ``pip install -e ".[agentscope1]"`` (the original error
chained); any other import failure passes through unchanged.
"""

from __future__ import annotations

import re

__all__ = ["AGENTSCOPE_VERSION", "IS_1X"]

EXTRA_1X = '-e ".[agentscope1]"'
"""What a 1.x project installs, from a clone of agentscope-ctx (the package is not on an index):
AgentScope 1.x and the fixes a fresh 1.x install needs."""

_FIXED_BY_EXTRA = re.compile(r"\b(mcp|greenlet|tqdm)\b")
"""What a fresh AgentScope 1.0.21 install fails on: `streamablehttp_client` from mcp 2, the
missing greenlet (through SQLAlchemy's asyncio check) and the missing tqdm."""


def _installed_version() -> str | None:
    from importlib import metadata  # only when AgentScope fails to import: 10+ ms to load

    try:
        return metadata.version("agentscope")
    except metadata.PackageNotFoundError:
        return None


try:
    import agentscope
except ImportError as error:
    _version = _installed_version()
    if (
        _version is None
        or not _version.startswith("1.")
        or not _FIXED_BY_EXTRA.search(f"{error.name} {error}")
    ):
        raise
    raise ImportError(
        f"AgentScope {_version} is installed but does not import ({error}). AgentScope 1.x "
        "needs mcp<2, greenlet and tqdm, which it does not install itself: in the clone of "
        f"agentscope-ctx, pip install {EXTRA_1X}"
    ) from error

AGENTSCOPE_VERSION: str = str(agentscope.__version__)
"""The installed AgentScope version, e.g. ``"1.0.21"`` or ``"2.0.11"``."""

IS_1X: bool = AGENTSCOPE_VERSION.split(".", 1)[0] == "1"
"""Whether the installed AgentScope is a 1.x release. Type checkers see both branches of an
``if IS_1X:`` unless told otherwise (mypy: ``--always-false IS_1X`` for the 2.x run)."""

MIN_2X = "2.0.11"
"""The oldest AgentScope 2.x the adapter works with: `FunctionTool(permission=...)`, which
every tool we add needs (before it, a custom tool asks the user at every call), came in
2.0.11. pyproject's range leaves 2.0.0-2.0.10 out; this is the check for an install that
got one anyway (`--no-deps`, a pinned environment)."""


def require_supported(version: str) -> None:
    """Refuse an AgentScope 2.x older than `MIN_2X`, naming it (1.x and 3.x pass here).

    Raises:
        ImportError: `version` is a 2.x release before `MIN_2X`.
    """
    match = re.match(r"(\d+)\.(\d+)\.(\d+)", version)
    if match is None or match[1] != "2":
        return
    minimum = tuple(int(p) for p in MIN_2X.split("."))
    if tuple(int(p) for p in match.groups()) < minimum:
        raise ImportError(
            f"agentscope_ctx needs AgentScope >= {MIN_2X} on the 2.x line; {version} is "
            f'installed: pip install -U "agentscope>={MIN_2X},<3"'
        )


require_supported(AGENTSCOPE_VERSION)  # at `import agentscope_ctx`: its names load lazily
