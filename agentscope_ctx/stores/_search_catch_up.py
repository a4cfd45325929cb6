"""`CatchUp`: how the local search index (`_search.SearchIndex`, a part of it kept apart to
keep each module to one job) catches up with the files: the owners kept while the index was
busy, the files gone, then each file from where its indexing stopped (dialog files by whole
lines, saved outputs in pieces, the least left first, memory files whole), within a deadline
and a budget of output bytes; and the background step that indexes what searches leave."""

from __future__ import annotations

import os
import sqlite3
import time
from collections import OrderedDict
from collections.abc import Iterable
from pathlib import Path

from ..core._failures import FailureLog
from ..core._tenant import Tenant
from ..core.search import _index_pieces as pieces
from ..core.search._background import BackgroundWork
from ._search_db import (
    IndexBusy,
    IndexConnection,
    IndexDatabase,
    add_doc,
    batch,
    drop_one,
    set_owner,
    unowned_outputs,
    write,
)
from ._search_files import (
    ALL_KINDS,
    folder_key,
    index_dialog,
    index_file,
    index_piece,
    source_files,
    up_to_date,
)
from ._search_kept import KeptOwners
from ._search_record import Record, parse_record
from ._search_turns import searches_waiting, searching

__all__ = ["CatchUp", "searches_waiting", "searching"]

STEP_SECONDS = 0.2
"""Longest a background step holds the index (then a search or a save may take it)."""
BUSY_TRIES = 40
"""Times in a row the background indexing finds the index busy before it stops."""
MAX_CLAIMS = 64
"""Tenants whose claims are kept for the background (`CatchUp.claimed`)."""
YIELD_SECONDS = 0.01
"""How long a background step waits, taking nothing, while a search of its index runs."""


class CatchUp:
    """The catch-up of `SearchIndex` (whose `__init__` sets these attributes)."""

    root: Path
    db: IndexDatabase
    failures: FailureLog
    background: BackgroundWork
    _calls: OrderedDict[str, tuple[str, str]]
    _kept: KeptOwners
    """The owners kept while the index was busy, those of every handle of the process on
    this working dir (`_search_kept`): whichever writes next writes them (`pending`), and
    those `_write_pending` took last (`recent`: a search's tail takes them with `pending`,
    they may be written but not committed yet)."""
    _busy_tries: int
    _claims: OrderedDict[Tenant, None]
    """Tenants whose claims of unowned outputs a search read into its tail (`claimed`)."""
    _indexed: int
    """Files a catch-up indexed (whole or a piece) in this process (`SearchWork`)."""

    def _write_pending(self, db: sqlite3.Connection) -> None:
        """Record the owners kept while the index was busy (kept again if it still is)."""
        with self._kept.lock:
            if not self._kept.pending:
                return
            owners = list(self._kept.pending)
            self._kept.pending.clear()
            self._kept.recent.extend(owners)  # until surely committed: a search's tail reads them
        try:
            with write(db, self.db.deadline):
                for name, owner, ts in owners:
                    set_owner(db, name, owner, ts)
        except BaseException:
            with self._kept.lock:
                self._kept.pending.extendleft(reversed(owners))
            raise

    def _output_name(self, path: str | Path) -> str | None:
        """``tool_result/NAME`` when `path` is a file of this working dir's output store."""
        try:
            given = Path(path)
            if given.parent.resolve() != self.root / "tool_result":
                return None
        except (OSError, ValueError):
            return None
        return f"tool_result/{given.name}"

    def _catch_up(
        self,
        db: sqlite3.Connection,
        deadline: float | None,
        kinds: Iterable[str] = ALL_KINDS,
        *,
        busy: list[bool] | None = None,
        output_bytes: int | None = None,
        fits_only: bool = False,
    ) -> int:
        """Index what is missing until `deadline`, saved outputs in pieces (the smallest
        first) and at most about `output_bytes` of them (`None`: no bound; `fits_only`: only
        the outputs whose rest fits in what is left of it); returns how many files were
        left, whole or in part. When another writer holds the index past the
        run's wait, the rest is left and `busy` (when given) gets an entry; without `busy`,
        `IndexBusy` is raised. The saved outputs are not listed while their folder is as it
        was when all of them were found indexed (`IndexConnection.outputs_whole`)."""
        assert isinstance(db, IndexConnection)
        kinds = tuple(kinds)
        folder = None
        if "tool_result" in kinds:
            folder = folder_key(self.root / "tool_result")  # read before the listing
            if folder is not None and folder == db.outputs_whole:
                kinds = tuple(k for k in kinds if k != "tool_result")
        with batch(db, deadline):
            pending, left = self._catch_up_batch(db, deadline, kinds, busy, output_bytes, fits_only)
        if "tool_result" in kinds and "tool_result" not in left and not db.in_transaction:
            db.outputs_whole = folder  # committed: every output listed is indexed whole
        return pending

    def _catch_up_batch(
        self,
        db: sqlite3.Connection,
        deadline: float | None,
        kinds: tuple[str, ...],
        busy: list[bool] | None,
        output_bytes: int | None,
        fits_only: bool,
    ) -> tuple[int, set[str]]:
        """`_catch_up` inside one batch (`_search_db.batch`: one text index commit): how many
        files were left, and their kinds (with the kinds of files that could not be read)."""
        marks = ",".join("?" * len(kinds))
        known = {
            row[0]: row[1:]
            for row in db.execute(
                f"SELECT path, inode, size, stamp, kind FROM sources WHERE kind IN ({marks})",
                kinds,
            )
        }
        present = self._files(kinds)  # saved outputs first: dialog records name their owners
        gone = [path for path in known if path not in present]
        pending, left_kinds = 0, set()
        try:
            self._write_pending(db)
            if gone:
                self._drop(db, gone)
        except IndexBusy:
            if busy is None:
                raise
            busy.append(True)
        budget = [output_bytes]

        def left(item: tuple[str, tuple[str, os.stat_result]]) -> tuple[int, int]:
            rel, (kind, stat) = item
            state = known.get(rel)
            done = 0 if state is None or kind != "tool_result" else int(state[1])
            return ALL_KINDS.index(kind), stat.st_size - done if kind == "tool_result" else 0

        for item in sorted(present.items(), key=left):
            rel, (kind, stat) = item
            state = known.get(rel)
            if state is not None and up_to_date(kind, state, stat):
                continue
            need = left(item)[1] if fits_only else 1  # fits_only: what it can finish
            spent = kind == "tool_result" and budget[0] is not None and budget[0] < need
            if busy or spent or (deadline is not None and time.monotonic() > deadline):
                pending += 1
                left_kinds.add(kind)
                continue
            self._indexed += 1
            try:
                if kind == "dialog":
                    self._index_dialog(db, rel, deadline)
                elif kind != "tool_result":
                    self._index_file(db, rel, kind)
                elif not self._index_output(db, rel, deadline, budget):
                    pending += 1
                    left_kinds.add(kind)
            except OSError as exc:  # unreadable now: tried again at the next catch-up
                self.failures.failed(f"search_index:{rel}", f"cannot index {rel}: {exc}")
                left_kinds.add(kind)
            except IndexBusy:
                if busy is None:
                    raise
                busy.append(True)
                pending += 1
                left_kinds.add(kind)
        if busy:
            left_kinds.update(kinds)  # owners or drops may not be written
        return pending, left_kinds

    def _claim(self, db: sqlite3.Connection, tenant: Tenant, busy: list[bool]) -> None:
        """Record `tenant` as the owner of the saved outputs indexed without one whose name
        carries its tags (`Tenant.tags`: its agent key's and session's). Who saved an output
        is told at its save and kept in the index, learnt again from a dialog record naming
        it, or carried over to a new generation from a readable old one; an index lost
        whole forgets it for the newest outputs, which no record names yet, and its session's
        search would no longer find them (issue 46). Their names still say whose they are,
        as `read_file` reads them. When the index is busy they are claimed at a later search
        (`busy` gets an entry)."""
        names = unowned_outputs(db, tenant.tags)
        if not names:
            return
        try:
            with write(db, self.db.deadline):
                for name in names:
                    set_owner(db, name, (tenant.agent, tenant.session, None, None), None)
        except IndexBusy:
            busy.append(True)

    def _background_step(self) -> bool:
        """One step of the background indexing: catch up for `STEP_SECONDS`, a piece of the
        saved outputs at most; whether more is left. It never waits for the index (so it
        never holds this process's lock while waiting for another process): when the index
        is busy it tries again a little later, and gives up after `BUSY_TRIES` (a search
        that leaves work starts it again). While a search of this process waits for the index
        or runs (any handle's: `searching`), it takes nothing and tries again a little later:
        a search waits for at most the step or commit in progress, not for the background
        steps of the other handles, which would take the index before it one after another,
        each with a commit of 100 ms to seconds on a busy disk (issue 46 item 11); the search
        reads what it needs into its tail (`_search_tail`)."""
        if searches_waiting(self.root):
            time.sleep(YIELD_SECONDS)
            return True
        try:
            pending = self.db.run(self._step, wait=0)
        except IndexBusy:
            self._busy_tries += 1
            if self._busy_tries >= BUSY_TRIES:
                self._busy_tries = 0
                return False
            time.sleep(0.05)
            return True
        self._busy_tries = 0
        return pending > 0

    def _step(self, db: sqlite3.Connection) -> int:
        """A background step on `db`: the claims the searches read into their tails
        (`claimed`), then `STEP_SECONDS` of catch-up."""
        with self._kept.lock:
            tenants, self._claims = list(self._claims), OrderedDict()
        busy: list[bool] = []
        for at, tenant in enumerate(tenants):
            self._claim(db, tenant, busy)
            if busy:
                self.claimed(tenants[at:])
                raise IndexBusy("the search index is busy (claims kept for the next step)")
        return self._catch_up(db, time.monotonic() + STEP_SECONDS, output_bytes=pieces.PIECE_BYTES)

    def claimed(self, tenants: Iterable[Tenant]) -> None:
        """A search read outputs of `tenants` that the index knows no owner of into its tail,
        claimed: the background writes the claims (`_claim`), the newest `MAX_CLAIMS`."""
        with self._kept.lock:
            for tenant in tenants:
                self._claims.pop(tenant, None)
                self._claims[tenant] = None
            while len(self._claims) > MAX_CLAIMS:
                self._claims.popitem(last=False)
        self.background.kick()

    def _index_output(
        self, db: sqlite3.Connection, rel: str, deadline: float | None, budget: list[int | None]
    ) -> bool:
        """Index a saved output piece by piece until it is whole, `deadline` passes or
        `budget[0]` bytes are spent (lowered by what was indexed); whether it is whole."""
        while True:
            used, whole = index_piece(db, self.root, rel, self.db.deadline, pieces.PIECE_BYTES)
            if budget[0] is not None:
                budget[0] -= used
            if whole:
                return True
            if (budget[0] is not None and budget[0] <= 0) or (
                deadline is not None and time.monotonic() > deadline
            ):
                return False

    def _drop(self, db: sqlite3.Connection, paths: Iterable[str]) -> None:
        with write(db, self.db.deadline):
            for path in paths:
                drop_one(db, path)

    def _files(self, kinds: Iterable[str]) -> dict[str, tuple[str, os.stat_result]]:
        return source_files(self.root, kinds)

    def _index_file(self, db: sqlite3.Connection, rel: str, kind: str) -> None:
        index_file(db, self.root, rel, kind, self.db.deadline)

    def _index_dialog(self, db: sqlite3.Connection, rel: str, deadline: float | None) -> None:
        index_dialog(db, self.root, rel, deadline, self.db.deadline, self._add_record)

    def _add_record(
        self, db: sqlite3.Connection, rel: str, line: int, offset: int, raw: bytes
    ) -> None:
        record = parse_record(rel, line, offset, raw)
        if record is not None:
            add_doc(db, record.values, record.chunks)
            self._learn(db, record)

    def _learn(self, db: sqlite3.Connection, record: Record) -> None:
        """What a dialog record tells this handle: the calls it makes (whose arguments name
        the outputs of later records) and the owners of the saved outputs it names."""
        for call_id, call in record.calls.items():
            self._calls[call_id] = call
            if len(self._calls) > 512:
                self._calls.popitem(last=False)
        for file_path, tool, call_id in record.outputs:
            name = self._output_name(file_path)
            if name is not None:
                call_args = self._calls.get(call_id, (tool, ""))[1] or None
                set_owner(db, name, (record.agent, record.session, tool, call_args), record.ts)
