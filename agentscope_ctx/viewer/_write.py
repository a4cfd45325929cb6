"""`write_page`: read a session and write its page (the CLI's `view`, the demo)."""

from __future__ import annotations

from pathlib import Path

from ..core._private import write_atomic
from ..core.config._config import ContextConfig
from ._page import render_page
from ._session import SessionView, load_session

__all__ = ["save_page", "write_page"]


def write_page(config: ContextConfig, out: Path, session: str | None = None) -> SessionView:
    """Write the page of `session` in the store `config` names to `out`; return what it shows."""
    view = load_session(config, session)
    save_page(view, out)
    return view


def save_page(view: SessionView, out: Path) -> None:
    """Write the page of `view` to `out`, mode ``0600`` whatever the umask (it shows the
    session's dialog and outputs): a new file renamed over `out` (`write_atomic`).

    Raises:
        OSError: The page cannot be written; `out` is unchanged.
    """
    write_atomic(Path(out), render_page(view))
