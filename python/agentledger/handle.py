"""The narrow handle the lower layers take instead of the ``Ledger`` facade.

``Ledger`` (``ledger.py``) sits above every module that reads or writes a ledger for it:
signing and checkpoints, archives and gc, the journal, activity, phase, bernstein and the
verifier. They take a ``LedgerHandle`` (the file, its id, the key folder, the blob store,
its runs), and a run's features take a ``RunHandle``; ``Ledger`` and ``Run`` are such
handles, passed down as themselves, so none of those modules imports either, not even for
its types. What only a layer above can do comes down the same way: ``verify_whole``, the
whole verify that signing requires before it signs a ledger nothing vouches for, is the
facade's (the verifier sits above signing).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from agentledger._core import Entry
    from agentledger.cas import BlobStore
    from agentledger.keys import KeyStore
    from agentledger.storage import Database


class Finding(Protocol):
    """One finding of a verify (``verify.Divergence``) as signing reads it: its check."""

    @property
    def check(self) -> str: ...


class RunFindings(Protocol):
    """One run's verdict (``verify.RunVerdict``) as signing reads it."""

    @property
    def divergences(self) -> Sequence[Finding]: ...


class WholeVerify(Protocol):
    """A whole verify (``verify.VerifyReport``) as signing reads it: what it found, and the
    log it rebuilt from every entry (a ``proven.Proven``, checked by whoever takes it)."""

    @property
    def workspace(self) -> Sequence[Finding]: ...

    @property
    def runs(self) -> Sequence[RunFindings]: ...

    @property
    def proven(self) -> object: ...


class RunHandle(Protocol):
    """One run's journal (``journal.Run``), as activity, phase, gc and bernstein use it.

    The underscored members are the package's own: an append or a head proof inside a
    write transaction the caller already holds, and whether a run with no row yet is
    ``NotFound`` (``_must_exist``) rather than created by its first append."""

    @property
    def id(self) -> str: ...

    @property
    def ledger(self) -> LedgerHandle: ...

    @property
    def _must_exist(self) -> bool: ...

    def append(self, kind: str, body: Mapping[str, Any]) -> Entry: ...

    def entries(self, start: int = 0, kind: str | None = None) -> Iterator[Entry]: ...

    def _append_locked(self, conn: Any, batch: list[tuple[str, Any]]) -> list[Entry]: ...

    def _prove_head(self, conn: Any) -> None: ...


class LedgerHandle(Protocol):
    """One open ledger (``ledger.Ledger``), as the layers below the facade use it."""

    @property
    def id(self) -> str: ...

    @property
    def path(self) -> Path: ...

    @property
    def db(self) -> Database: ...

    @property
    def blobs(self) -> BlobStore: ...

    @property
    def keys(self) -> KeyStore: ...

    def run(self, run_id: str) -> RunHandle: ...

    def get_run(self, run_id: str) -> RunHandle: ...

    def has_run(self, run_id: str) -> bool: ...

    def runs(self) -> list[str]: ...

    def verify_whole(self) -> WholeVerify: ...
