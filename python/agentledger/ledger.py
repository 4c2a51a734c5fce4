"""The workspace ledger: one SQLite file holding every run journal and every blob."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING

from agentledger import log_upgrade
from agentledger.archive import is_archive_file
from agentledger.cas import BlobStore
from agentledger.errors import NotFound, WrongThread
from agentledger.ids import check_run_id
from agentledger.journal import Run
from agentledger.keys import KeyStore
from agentledger.storage import Database
from agentledger.storage.migrations import C2SP_SCHEMA

if TYPE_CHECKING:
    # The verifier (and the phase models it loads) is imported when verify runs: commands
    # that only read or append start without it.
    from agentledger.verify import Progress, RunVerdict, VerifyOptions, VerifyReport


class Ledger:
    """A handle on one ledger file. Use as a context manager, or call ``close()``.

    A ``Ledger`` belongs to the thread that opened it: used from another thread, it raises
    ``WrongThread`` before touching SQLite (its connection is not shared between threads,
    and two threads inside one would interleave their transactions). Open one per thread;
    each sees what the others commit.
    """

    def __init__(self, db: Database, keys: KeyStore | None = None) -> None:
        self._owner = threading.get_ident()
        self._db = db
        self._blobs = BlobStore(db)
        self.keys = keys or KeyStore()
        """Where the install and audit keys live (outside the ledger); touched only on use."""
        # A file whose schema is not ours is read no further (storage/connection.py).
        ledger_id = (
            None
            if db.schema_findings
            else db.scalar("SELECT value FROM ledger_meta WHERE key = 'ledger_id'")
        )
        self.id = str(ledger_id or "")

    def _this_thread(self) -> None:
        if threading.get_ident() != self._owner:
            raise WrongThread(
                f"{self._db.path}: this Ledger was opened by another thread; open one Ledger "
                "per thread (Ledger.open(path) in each), they share the file safely"
            )

    @property
    def db(self) -> Database:
        """The SQLite file (``storage.Database``), for the thread that opened the ledger."""
        self._this_thread()
        return self._db

    @property
    def blobs(self) -> BlobStore:
        """The blob store, for the thread that opened the ledger."""
        self._this_thread()
        return self._blobs

    @classmethod
    def open(
        cls,
        path: str | os.PathLike[str],
        *,
        create: bool = True,
        readonly: bool = False,
        key_dir: str | os.PathLike[str] | None = None,
    ) -> Ledger:
        """Open (and by default create, with its folder) the ledger at ``path``.

        Refuses, changing nothing, a file that is not a ledger or that a newer version wrote.
        A sealed archive is always opened read-only.
        ``key_dir`` is the key folder (default ``$AGENTLEDGER_HOME`` or
        ``~/.local/state/agentledger``); keys never live in the ledger.
        """
        path = Path(path)
        # A sealed archive (archive.py) opens read-only: it cannot be extended by accident.
        readonly = readonly or (path.is_file() and is_archive_file(path))
        db = Database.open(path, create=create, readonly=readonly)
        ledger = cls(db, KeyStore(key_dir) if key_dir is not None else None)
        if db.upgraded_from and db.upgraded_from < C2SP_SCHEMA:
            # The log's tree was rebuilt as a C2SP log: carry the signer over to it.
            log_upgrade.sign_upgraded(ledger)
        return ledger

    @property
    def path(self) -> Path:
        return self._db.path

    def close(self) -> None:
        self.db.close()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    # ---- runs ---------------------------------------------------------------------------

    def run(self, run_id: str) -> Run:
        """The run called ``run_id``: it reads as empty until its first append creates it.

        Only naming a run writes nothing (reading never creates a run).
        """
        check_run_id(run_id)
        return Run(self, run_id, must_exist=False)

    def get_run(self, run_id: str) -> Run:
        """The existing run called ``run_id``; ``NotFound`` if there is none."""
        check_run_id(run_id)
        if not self.has_run(run_id):
            raise NotFound(f"no run {run_id!r} in {self.path}")
        return Run(self, run_id)

    def has_run(self, run_id: str) -> bool:
        return bool(self.db.rows("SELECT 1 FROM runs WHERE run_id = ?", (run_id,)))

    def holds_run(self, run_id: str) -> None:
        """``NotFound`` unless the file holds ``run_id``: its row in ``runs``, entries (a
        run whose row was removed is still there to show and verify: ``run.unknown``), or
        audit records (a run removed whole: ``audit.orphan``)."""
        check_run_id(run_id)
        if self.has_run(run_id) or self.db.rows(
            "SELECT 1 FROM entries WHERE run_id = ? LIMIT 1", (run_id,)
        ):
            return
        mirror = self.db.rows("SELECT 1 FROM sqlite_schema WHERE name = 'audit_log'")
        if not mirror or not self.db.rows(  # (no mirror in a schema before activities)
            "SELECT 1 FROM audit_log WHERE run_id = ? LIMIT 1", (run_id,)
        ):
            raise NotFound(f"no run {run_id!r} in {self.path}")

    def runs(self) -> list[str]:
        """Every run id, in creation order. A row whose id is not text (a damaged file;
        verify names it) is no run."""
        return [
            row[0]
            for row in self.db.rows(
                "SELECT run_id FROM runs WHERE typeof(run_id) = 'text' ORDER BY ordinal"
            )
        ]

    # ---- verification -------------------------------------------------------------------

    def verify_run(self, run_id: str, options: VerifyOptions | None = None) -> RunVerdict:
        """Re-derive one run: ``.code`` is 0 clean, 1 no such run, 2 diverged."""
        return self.verify(runs=[run_id], options=options).runs[0]

    def verify(
        self,
        runs: list[str] | None = None,
        *,
        jobs: int = 0,
        progress: Progress | None = None,
        options: VerifyOptions | None = None,
    ) -> VerifyReport:
        """Verify every run (and the blob store), or only ``runs``.

        ``jobs`` is the number of verification threads (0: every core); ``options`` carries
        the rest (trusted keys, audit key, compat mode, checkpoint).
        """
        # On first use, for start-up: commands that only read or append never load it.
        from agentledger.verify import VerifyOptions, verify_ledger

        options = options or VerifyOptions()
        options.jobs = jobs or options.jobs
        options.progress = progress or options.progress
        return verify_ledger(self, runs, options)

    def verify_whole(self) -> VerifyReport:
        """A whole verify with the default options: the one the layers below run through
        their ``LedgerHandle`` (signing, before it signs a ledger nothing vouches for)."""
        return self.verify()
