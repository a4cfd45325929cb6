"""`write_page`: read a session and write its page (the CLI's `view`, the demo)."""

from __future__ import annotations

from pathlib import Path

from ..core.config._config import ContextConfig
from ._page import render_page
from ._session import SessionView, load_session

__all__ = ["write_page"]


def write_page(config: ContextConfig, out: Path, session: str | None = None) -> SessionView:
    """Write the page of `session` in the store `config` names to `out`; return what it shows."""
    view = load_session(config, session)
    out.write_text(render_page(view), encoding="utf-8")
    return view
