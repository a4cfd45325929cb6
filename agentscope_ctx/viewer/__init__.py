"""The session viewer (`agentscope-ctx view`, DESIGN §17): one self-contained HTML page of a
session, read from its store (`load_session`) and drawn by `render_page`."""

from __future__ import annotations

from ._page import render_page
from ._session import SessionView, load_session
from ._write import save_page, write_page

__all__ = ["SessionView", "load_session", "render_page", "save_page", "write_page"]
