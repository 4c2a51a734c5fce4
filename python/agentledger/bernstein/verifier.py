"""Verify bernstein runs: bernstein's own verdict (compat) and the stricter one, in one
Rust call (``_core.bernstein_check`` for a ledger, ``_core.bernstein_verify_workdir`` for
a workdir on disk): journals, evidence sets, stored reports, receipts, the audit chain's
walk and its cross-check are all decided there, on every core. This module only gathers
what the call needs; ``verify/bernstein_runs.py`` reports the results.

Each result (``_core.BernsteinRun``) carries both verdicts: ``compat_code`` is
bernstein's exit code for ``activity verify`` (0 clean, 1 not found / no activity rows /
bernstein itself would raise, 2 not ok), and ``findings`` the strict findings, those
bernstein's verdict ignores marked ``strict_only``. The plain Python verifier the Rust
one is held to lives in the tests (``tests/bernstein/reference.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from agentledger import _core
from agentledger.bernstein.audit_chain import AuditChain, audit_keys
from agentledger.bernstein.format import valid_run_id
from agentledger.bernstein.importer import FORMAT
from agentledger.bernstein.workdir import DirectoryWorkdir, LedgerWorkdir
from agentledger.storage import native

if TYPE_CHECKING:
    import apsw

AUDITED_FIELDS = _core.AUDITED_FIELDS  # the one list, in the Rust crate (audit.rs)


def options(
    *, trusted: Iterable[bytes], jobs: int, stages: bool = False, referenced: bool = False
) -> _core.BernsteinOptions:
    """``_core.BernsteinOptions``: plain values."""
    return _core.BernsteinOptions(
        trusted=sorted(trusted), stages=stages, referenced=referenced, jobs=jobs
    )


# A journal_index Rust reads as a row's step: an integer of 64 bits.
_STEPS = range(-(2**63), 2**63)


def audit_mirror(audit: AuditChain | None) -> _core.BernsteinAuditMirror | None:
    """The chain's ``activity.result`` records as the workdir verify cross-checks them,
    when the chain mirrors activities (``None``: runs are not cross-checked)."""
    if audit is None or not audit.mirrors_activities:
        return None
    # A record whose journal_index is not an integer audits no row; verify reports it
    # with the chain's own findings (``verify.bernstein_runs.audit_findings``).
    return _core.BernsteinAuditMirror(
        [
            (
                record.run_id.encode("utf-8", "surrogatepass"),
                record.journal_index,
                [
                    (name, str(record.details[name]).encode("utf-8", "surrogatepass"))
                    for name in (*AUDITED_FIELDS, "journal_event_hash")
                    if name in record.details
                ],
            )
            for record in audit.walked
            if type(record.journal_index) is int and record.journal_index in _STEPS
        ]
    )


def check_ledger(
    conn: apsw.Connection,
    journals: Mapping[str, str],
    *,
    segments: list[tuple[str, bytes]] | None,
    master: bytes | None = None,
    trusted: Iterable[bytes] = (),
    jobs: int = 0,
    stages: bool = False,
    rehash: bool = False,
    mark: bytes | None = None,
) -> _core.BernsteinCheck:
    """The imported runs ``journals`` (run id -> journal path in ``bernstein_files``) of
    the ledger open on ``conn``, checked in one Rust call (``_core.bernstein_check``): the
    files table read (manifests, absent blobs, the store index), the audit chain
    ``segments`` walked (``None``: not walked; ``master`` checks its HMACs), the runs
    verified in that order and cross-checked with the chain, and with ``rehash`` the
    blobs they referenced re-hashed. With ``mark``, the mark of ``conn``'s transaction
    (``Database.read_mark``), the pool's threads read on readers of their own proven to
    see its snapshot; without, every read goes through ``conn``."""
    runs = [(run_id, path if valid_run_id(run_id) else None) for run_id, path in journals.items()]
    chosen = options(trusted=trusted, jobs=jobs, stages=stages, referenced=rehash)
    with native.sqlite_errors():
        return _core.bernstein_check(
            native.handle(conn),
            runs,
            chosen,
            files=(LedgerWorkdir.FILES, FORMAT, LedgerWorkdir.NAME_FROM),
            audit=None if segments is None else [data for _, data in segments],
            keys=audit_keys(master),
            rehash=LedgerWorkdir.LISTED_BLOBS if rehash else None,
            mark=mark,
        )


def verify_ledger_runs(
    conn: apsw.Connection,
    journals: Mapping[str, str],
    *,
    segments: list[tuple[str, bytes]] | None = None,
    master: bytes | None = None,
    trusted: Iterable[bytes] = (),
    jobs: int = 0,
    stages: bool = False,
) -> list[_core.BernsteinRun]:
    """The imported runs ``journals``, verified from the ledger open on ``conn`` in that
    order (cross-checked with the audit chain ``segments`` when given)."""
    check = check_ledger(
        conn, journals, segments=segments, master=master, trusted=trusted, jobs=jobs,
        stages=stages,
    )  # fmt: skip
    return check.runs


def verify_runs(
    workdir: DirectoryWorkdir,
    run_ids: Iterable[str],
    *,
    audit: AuditChain | None = None,
    trusted: Iterable[bytes] = (),
    jobs: int = 0,
    stages: bool = True,
) -> list[_core.BernsteinRun]:
    """Runs of a workdir on disk, verified in place and read the way bernstein reads it."""
    chosen = options(trusted=trusted, jobs=jobs, stages=stages)
    return _core.bernstein_verify_workdir(
        str(workdir.root), list(run_ids), chosen, audit=audit_mirror(audit)
    )
