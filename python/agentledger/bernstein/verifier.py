"""Verify bernstein runs: bernstein's own verdict (compat) and the stricter one, in one
Rust call (``_core.bernstein_verify``): journals, evidence sets, stored reports,
receipts and the audit cross-check are all decided there, on every core. This module
only gathers what the call needs; ``verify/bernstein.py`` reports the results.

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
from agentledger.bernstein.audit_chain import AuditChain
from agentledger.bernstein.format import valid_run_id
from agentledger.bernstein.workdir import DirectoryWorkdir
from agentledger.storage import native

if TYPE_CHECKING:
    import apsw

AUDITED_FIELDS = _core.AUDITED_FIELDS  # the one list, in the Rust crate (audit.rs)


def options(
    *, trusted: Iterable[bytes], jobs: int, stages: bool = False, referenced: bool = False
) -> _core.BernsteinOptions:
    """``_core.BernsteinOptions``: plain values (the store's index and the audit mirror are
    arguments of the call, only borrowed by it)."""
    return _core.BernsteinOptions(
        trusted=sorted(trusted), stages=stages, referenced=referenced, jobs=jobs
    )


def audit_mirror(audit: AuditChain | None) -> _core.BernsteinAuditMirror | None:
    """The chain's ``activity.result`` records as the Rust cross-check reads them, when
    the chain mirrors activities (``None``: runs are not cross-checked)."""
    if audit is None or not audit.mirrors_activities:
        return None
    if audit.mirror is not None:
        return audit.mirror
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
            if isinstance(record.journal_index, int) and not isinstance(record.journal_index, bool)
        ]
    )


def verify_ledger_runs(
    conn: apsw.Connection,
    journals: Mapping[str, str],
    *,
    store: _core.BernsteinStoreIndex | None,
    audit: AuditChain | None = None,
    trusted: Iterable[bytes] = (),
    jobs: int = 0,
    stages: bool = False,
    referenced: bool = False,
) -> list[_core.BernsteinRun]:
    """The imported runs ``journals`` (run id -> journal path in ``bernstein_files``),
    verified from the ledger open on ``conn``, in that order."""
    runs = [(run_id, path if valid_run_id(run_id) else None) for run_id, path in journals.items()]
    chosen = options(trusted=trusted, jobs=jobs, stages=stages, referenced=referenced)
    with native.sqlite_errors():
        return _core.bernstein_verify(
            native.handle(conn), runs, chosen, store=store, audit=audit_mirror(audit)
        )


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
