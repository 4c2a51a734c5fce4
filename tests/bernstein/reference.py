"""The plain Python verifier of bernstein runs: the reference the Rust verifier
(``_core.bernstein_check``, ``rust/bernstein/src/verify.rs``) is held to; and the plain
Python walk of the audit chain (``walk_audit``), the reference of the Rust walk
(``rust/bernstein/src/audit/walk.rs``, ``test_audit_walk.py``).

Stage by stage, in bernstein's order, with Python's own ``json`` so that bernstein's
parsing quirks are reproduced by the very code that has them. The journal pass (chain
walk, evidence sets) is the Rust one (``_core.bernstein_verify_journals``), which has
its own tests against Python's ``json``.

Compat mode (``verify_activities`` in bernstein): exit 0 clean, 1 not found / no
activity rows / bernstein itself would raise, 2 not ok. Strict mode adds findings for
what bernstein lets through and answers 2 for them.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentledger import _core
from agentledger.bernstein.audit_chain import (
    GENESIS,
    SCHEME2_PREFIX,
    ActivityRecord,
    AuditChain,
    AuditProblem,
    hkdf_sha256,
)
from agentledger.bernstein.format import HEX64, artifact_hex, content_hash
from agentledger.bernstein.workdir import Workdir
from agentledger.errors import ExitCode
from tests.bernstein.reference_reports import (
    ReceiptVerdict,
    lookup_raises,
    store_reader,
    verify_browser_report,
    verify_receipt,
    verify_research_report,
)

STRICT_CHECKS = {
    "bernstein.index": "stored index differs from the row's position",
    "bernstein.payload_hash": "stored payload_hash differs from the recomputed one",
    "bernstein.duplicate_key": "a line repeats a key; only the last value is hashed",
    "bernstein.blob.missing": "the journal references bytes the store lacks",
    "bernstein.report.missing": "a report its writer always stores is not in the store",
    "bernstein.receipt.self_asserted": "the receipt's only signer is the key it embeds",
    "bernstein.audit.missing_record": "a journal activity has no audit record, though the "
    "audit chain mirrors activities",
    "bernstein.audit.missing_from_journal": "an audited stage is not in the journal",
    "bernstein.audit.mismatch": "an audit record disagrees with the journal row",
    "bernstein.audit.chain": "the audit chain does not verify",
    "bernstein.crash": "bernstein itself raises on this data",
}
AUDITED_FIELDS = _core.AUDITED_FIELDS  # the one list, in the Rust crate (audit.rs)


@dataclass(frozen=True, slots=True)
class Finding:
    """One divergence: the run step (kept-row index), the check, the field, expected/actual."""

    step: int | None
    check: str
    field: str
    expected: str
    actual: str
    strict_only: bool = False


@dataclass
class StageVerdict:
    """One ``activity.result`` stage, in bernstein's ``--json`` shape plus its step."""

    stage_id: str
    kind: str
    step: int
    ok: bool = False
    reason: str = ""
    evidence_reattached: bool = False
    signed_receipt_verified: bool = False
    claim_verdicts: list[dict[str, Any]] = field(default_factory=list)
    browser_verdict: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "stage_id": self.stage_id,
            "kind": self.kind,
            "ok": self.ok,
            "evidence_reattached": self.evidence_reattached,
            "signed_receipt_verified": self.signed_receipt_verified,
            "claim_verdicts": self.claim_verdicts,
            "browser_verdict": self.browser_verdict,
            "reason": self.reason,
        }


@dataclass
class RunResult:
    run_id: str
    found: bool = False
    ok: bool = False
    chain_ok: bool = False
    reason: str = ""
    crash: str | None = None
    rows: int = 0
    journal: dict[str, Any] | None = None
    stages: list[StageVerdict] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    limits: list[str] = field(default_factory=list)
    unstored_reports: int = 0
    """Research/browser stages whose report is not in the store and need not be
    (``_report_required``: a legacy writer may never have stored one; bernstein skips the
    check, and no data tells a removed report from one never stored)."""
    referenced: set[str] = field(default_factory=set)
    """Content hashes whose stored digest was trusted for reattachment (to re-hash)."""

    @property
    def activities(self) -> int:
        return len(self.stages)

    @property
    def compat_code(self) -> int:
        """bernstein's exit code for ``activity verify`` on this run."""
        if self.crash is not None or not self.found:
            return ExitCode.NOT_FOUND
        return ExitCode.OK if self.ok else ExitCode.DIVERGED

    @property
    def strict_code(self) -> int:
        """0 clean (activities or not), 1 no journal, 2 any finding."""
        if self.journal is None:
            return ExitCode.NOT_FOUND
        return ExitCode.DIVERGED if self.findings else ExitCode.OK

    def compat_json(self) -> dict[str, Any]:
        """bernstein's ``activity verify --json`` object."""
        return {
            "run": self.run_id,
            "found": self.found,
            "ok": self.ok,
            "chain_ok": self.chain_ok,
            "reason": self.reason,
            "stages": [stage.to_json() for stage in self.stages],
        }


def verify_runs(
    workdir: Workdir,
    run_ids: Iterable[str],
    *,
    audit: AuditChain | ReferenceWalk | None = None,
    trusted: frozenset[bytes] = frozenset(),
    jobs: int = 0,
) -> list[RunResult]:
    """Verify runs; every result carries both the compat verdict and the strict findings.

    ``audit``: the workdir's audit chain, already walked (``None``: no cross-check).
    ``trusted``: raw Ed25519 public keys whose receipts are not self-asserted.
    """
    results = [RunResult(run_id) for run_id in run_ids]
    journals: list[bytes] = []
    present: list[RunResult] = []
    for result, data in zip(results, workdir.journals([r.run_id for r in results]), strict=True):
        if data is None:
            result.reason = f"no run journal for {result.run_id!r}"
            continue
        journals.append(data)
        present.append(result)
    index = workdir.store_index()
    has_store = workdir.has_store()
    reports = _core.bernstein_verify_journals(journals, jobs, index) if journals else []
    read = store_reader(workdir.read)
    for result, report in zip(present, reports, strict=True):
        result.journal = dict(report)
        _verify_run(result, report, workdir, has_store, read, trusted)
        _audit_and_limits(result, report["activities"], audit)
    return results


def _audit_and_limits(
    result: RunResult,
    activities: Sequence[Mapping[str, Any]],
    audit: AuditChain | ReferenceWalk | None,
) -> None:
    """The audit rule: when the workdir's chain mirrors activities at all, every run's
    rows are cross-checked with their records (``_cross_check_audit``), so that a row with
    no record is a finding wherever it stands; then the run's limits."""
    records = [] if audit is None else audit.activity_of(result.run_id)
    if audit is not None and audit.mirrors_activities:
        _cross_check_audit(result, activities, records)
        for problem in audit.problems:
            if problem.run_id == result.run_id:
                where = f"{problem.segment} line {problem.line}"
                _strict(
                    result,
                    None,
                    "bernstein.audit.chain",
                    where,
                    "a verifying record",
                    problem.reason,
                )
    indexes = (r.journal_index for r in records)
    _state_limits(result, max((i for i in indexes if isinstance(i, int)), default=None))


def _verify_run(
    result: RunResult,
    report: Mapping[str, Any],
    workdir: Workdir,
    has_store: bool,
    read: Any,
    trusted: frozenset[bytes],
) -> None:
    add = result.findings.append
    result.rows = int(report["count"])
    discarded = list(report["discarded_lines"])
    result.chain_ok = bool(report["chain_consistent"]) and not discarded
    if report["crash"]:
        result.crash = str(report["crash"])
        add(Finding(None, "bernstein.crash", "journal", "a verdict", result.crash, True))
    if report["error"] and report["divergent_index"] is None and not report["crash"]:
        add(
            Finding(
                None,
                "bernstein.chain",
                "hash_profile",
                "py-json-v1 or jcs-v2",
                str(report["profile"]),
            )
        )
    if report["divergent_index"] is not None:
        add(
            Finding(
                int(report["divergent_index"]),
                "bernstein.chain",
                str(report["divergent_field"]),
                str(report["expected_hash"]),
                str(report["actual_hash"]),
            )
        )
    for line in discarded:
        add(
            Finding(None, "bernstein.line.discarded", f"line {line}", "a JSON object", "unparsable")
        )
    for step, _line, name, expected, actual in report["row_findings"]:
        add(Finding(step, f"bernstein.{name}", name, expected, actual, True))
    activities = report["activities"]
    if not activities:
        result.reason = "run journal holds no activity.result entries"
        return
    result.found = True
    for row in activities:
        stage = _verify_stage(row, result, workdir, has_store, read, trusted)
        result.stages.append(stage)
        if not stage.ok:
            add(
                Finding(
                    stage.step, "bernstein.stage", f"stage {stage.stage_id!r}", "ok", stage.reason
                )
            )
    result.ok = result.chain_ok and all(stage.ok for stage in result.stages) and not result.crash
    if not result.ok and not result.reason:
        failing = next((s for s in result.stages if not s.ok), None)
        result.reason = failing.reason if failing else "journal Merkle chain diverges"


def _strict(
    result: RunResult, step: int | None, check: str, field_name: str, expected: str, actual: str
) -> None:
    result.findings.append(Finding(step, check, field_name, expected, actual, True))


def _verify_stage(
    row: dict[str, Any],
    result: RunResult,
    workdir: Workdir,
    has_store: bool,
    read: Any,
    trusted: frozenset[bytes],
) -> StageVerdict:
    stage = StageVerdict(stage_id=row["stage_id"], kind=row["kind"], step=int(row["step"]))
    step = stage.step
    if row["recompute_error"] is not None:
        result.crash = result.crash or f"evidence set hash raises: {row['recompute_error']}"
        stage.reason = str(row["recompute_error"])
        return stage
    anchored, recomputed = row["evidence_set_hash"], row["recomputed_evidence_set_hash"]
    if anchored != recomputed:
        stage.reason = (
            f"evidence_set_hash mismatch: anchored {anchored!r}, recomputed {recomputed!r}"
        )
        return stage
    observations = row["observations"]
    if not has_store:
        for _kind, ref, digest in observations:
            _strict(
                result,
                step,
                "bernstein.blob.missing",
                f"observation {ref!r}",
                digest,
                "no .sdd/cas",
            )
        if _report_required(stage.kind, observations):
            _absent_report(result, step, row["artifact_hash"], True, "no .sdd/cas")
    if not result.chain_ok:
        stage.reason = "journal Merkle chain diverges"
        return stage
    artifact = row["artifact_hash"]
    kind = stage.kind
    if has_store and kind in ("research", "browser"):
        reason = _check_report(stage, artifact, observations, workdir, read, result)
        if reason:
            stage.reason = reason
            return stage
    if has_store:
        reason = _reattach(stage, row, observations, workdir, result)
        if reason:
            stage.reason = reason
            return stage
        stage.evidence_reattached = bool(observations)
    if kind in ("data", "ops"):
        if not has_store:
            _strict(result, step, "bernstein.blob.missing", "receipt", artifact, "no .sdd/cas")
        else:
            reason = _check_receipt(stage, artifact, workdir, result, trusted)
            if reason:
                stage.reason = reason
                return stage
    stage.ok = True
    return stage


def _reattach(
    stage: StageVerdict,
    row: Mapping[str, Any],
    observations: list[tuple[str, str, str]],
    workdir: Workdir,
    result: RunResult,
) -> str:
    """bernstein's step 5: every observation's bytes exist and hash to its content hash."""
    known = row["reattach"]
    if known is not None and known[0] == "ok":
        result.referenced.update(o[2] for o in observations)
        return ""
    if known is not None and known[0] in ("missing", "mismatch"):
        # Rust found the first failing observation against the store index.
        result.referenced.update(o[2] for o in observations[: known[1]])
        checked = observations[known[1] :]
    else:
        checked = observations
    for _kind, ref, digest in checked:
        try:
            lookup_raises(digest)
        except ValueError as exc:  # UnicodeEncodeError too: bernstein raises it
            return _crashed(result, f"{type(exc).__name__}: {exc}")
        stored = workdir.stored_digest(digest)
        if stored is None:
            _strict(
                result,
                stage.step,
                "bernstein.blob.missing",
                f"observation {ref!r}",
                digest,
                "absent",
            )
            return f"evidence bytes missing from store for {ref!r}"
        if stored != digest:
            return f"content hash mismatch reattaching {ref!r}"
        result.referenced.add(digest)
    return ""


def _stored_artifact(
    stage: StageVerdict, artifact: str, workdir: Workdir, what: str, noun: str
) -> tuple[str, bytes | None]:
    """bernstein's common artifact steps: format, presence, hash. ``(reason, bytes)``."""
    name = artifact_hex(artifact)
    if not HEX64.fullmatch(name.removesuffix("\n")):  # bernstein's ``^…$`` allows a final \n
        return f"malformed artifact_hash for {what} stage: {artifact!r}", None
    data = workdir.read(f".sdd/cas/{name}")
    if data is None:
        return "", None
    if content_hash(data) != artifact:
        return f"{noun} bytes do not match anchored artifact_hash {artifact!r}", None
    return "", data


def _check_report(
    stage: StageVerdict,
    artifact: str,
    observations: list[tuple[str, str, str]],
    workdir: Workdir,
    read: Any,
    result: RunResult,
) -> str:
    research = stage.kind == "research"
    what, noun = ("research", "report") if research else ("browser", "flow report")
    reason, data = _stored_artifact(stage, artifact, workdir, what, noun)
    if reason or data is None:
        if not reason:
            required = _report_required(stage.kind, observations)
            _absent_report(result, stage.step, artifact, required)
        return reason
    try:
        report = json.loads(data)
    except ValueError as exc:
        label = "report" if research else "flow report"
        return f"stored {label} is not valid JSON: {type(exc).__name__}"
    if not isinstance(report, dict):
        return _crashed(result, _no_get(report))
    try:
        if research:
            ok, reason, claims = verify_research_report(report, read)
            stage.claim_verdicts = claims
            return "" if ok else reason
        verdict = verify_browser_report(report, read)
    except Exception as exc:  # bernstein's own check raises it too: no verdict
        return _crashed(result, f"{type(exc).__name__}: {exc}")
    stage.browser_verdict = verdict.to_json()
    return "" if verdict.ok else verdict.reason


def _check_receipt(
    stage: StageVerdict,
    artifact: str,
    workdir: Workdir,
    result: RunResult,
    trusted: frozenset[bytes],
) -> str:
    reason, data = _stored_artifact(stage, artifact, workdir, "data/ops", "receipt")
    if reason:
        return reason
    if data is None:
        _strict(result, stage.step, "bernstein.blob.missing", "receipt", artifact, "absent")
        return ""
    try:
        receipt = json.loads(data)
    except ValueError as exc:
        return f"stored receipt is not valid JSON: {type(exc).__name__}"
    if not isinstance(receipt, dict):
        return _crashed(result, _no_get(receipt))
    for key in ("inputs", "outputs"):  # DataOpsReceipt.from_dict reads each item
        items = receipt.get(key)
        for item in items if isinstance(items, list) else ():
            if not isinstance(item, dict):
                return _crashed(result, _no_get(item))
    try:
        verdict: ReceiptVerdict = verify_receipt(receipt, workdir.stored_digest)
    except Exception as exc:  # bernstein's own check raises it too: no verdict
        return _crashed(result, f"{type(exc).__name__}: {exc}")
    result.referenced.update(verdict.references)
    if verdict.ok and (
        verdict.signer_public_key is None or verdict.signer_public_key not in trusted
    ):
        signer = verdict.signer_public_key.hex() if verdict.signer_public_key else "unparsable"
        _self_asserted(result, stage.step, signer)
    stage.signed_receipt_verified = verdict.ok
    return verdict.reason


def _no_get(value: object) -> str:
    """What bernstein's ``X.from_dict(value)`` raises for a value that is not a dict (its
    first ``row.get(...)``), which it does not catch: it gives no verdict."""
    return f"AttributeError: '{type(value).__name__}' object has no attribute 'get'"


def _crashed(result: RunResult, crash: str) -> str:
    result.crash = result.crash or crash
    return crash


# ---- research and browser reports the store lacks --------------------------------------


def _report_required(kind: str, observations: Sequence[tuple[str, str, str]]) -> bool:
    """Whether a research or browser stage's report must be in the store: its writer
    stores one always, so an absent report was removed (bernstein skips a missing report
    silently, §8). Rust's ``report::report_required`` is its port.

    - browser: the observations are exactly those ``BrowserWorker``'s flow session
      captures (``browser_worker._FlowSession.anchor``): for each step ``i`` from 0, a
      ``snapshot`` named ``i:screenshot``, a ``snapshot`` named ``i:dom`` and an
      ``action_receipt`` named ``i:action``, in that order. That worker stores the flow
      report before it builds the result, on every path that yields one. A stage written
      with ``BrowserActivity`` directly (the legacy shape) names its observations as its
      caller likes, and may never have stored a report.
    - research: never. ``ResearchWorker`` stores its report, but its stages (``page``
      observations named by source, ``completed``/``ok``) are of the very shape
      ``ResearchActivity`` used directly gives, which stores none; nothing in the row, its
      audit record or the store tells the two apart.
    - a stage without observations (a refused flow) can come from either writer: never.
    """
    return kind == "browser" and _flow_session_observations(observations)


def _flow_session_observations(observations: Sequence[tuple[str, str, str]]) -> bool:
    """``(snapshot, i:screenshot), (snapshot, i:dom), (action_receipt, i:action)`` for
    ``i`` = 0, 1, …: what ``BrowserWorker`` captures, and nothing else."""
    if not observations or len(observations) % 3:
        return False
    captured = [(kind, ref) for kind, ref, _digest in observations]
    expected = [
        pair
        for step in range(len(observations) // 3)
        for pair in (
            ("snapshot", f"{step}:screenshot"),
            ("snapshot", f"{step}:dom"),
            ("action_receipt", f"{step}:action"),
        )
    ]
    return captured == expected


def _absent_report(
    result: RunResult, step: int, artifact: str, required: bool, actual: str = "absent"
) -> None:
    """A research or browser stage whose report the store lacks (or there is no store):
    a finding when its writer always stores one (``_report_required``), else a limit."""
    if required:
        _strict(result, step, "bernstein.report.missing", "flow report", artifact, actual)
    else:
        result.unstored_reports += 1


def _self_asserted(result: RunResult, step: int, signer: str) -> None:
    _strict(
        result,
        step,
        "bernstein.receipt.self_asserted",
        "signer_public_key_pem",
        "a trusted key (--trust)",
        f"ed25519:{signer}",
    )


# ---- the audit mirror -----------------------------------------------------------------


def _cross_check_audit(
    result: RunResult,
    activities: Sequence[Mapping[str, Any]],
    records: list[ActivityRecord],
) -> None:
    by_index: dict[int, ActivityRecord] = {}
    for record in records:
        index = record.journal_index
        if isinstance(index, int) and not isinstance(index, bool):
            by_index.setdefault(index, record)
        else:
            _strict(
                result, None, "bernstein.audit.mismatch", "journal_index", "an integer", repr(index)
            )
    rows = {int(row["step"]): row for row in activities}
    for step, row in rows.items():
        found = by_index.get(step)
        if found is None:
            _strict(
                result,
                step,
                "bernstein.audit.missing_record",
                f"stage {row['stage_id']!r}",
                "an audit record",
                "none",
            )
            continue
        for name in AUDITED_FIELDS:
            audited = str(found.details.get(name, ""))
            if audited != row[name]:
                _strict(result, step, "bernstein.audit.mismatch", name, audited, row[name])
        audited_hash = str(found.details.get("journal_event_hash", ""))
        if audited_hash != row["event_hash"]:
            _strict(
                result,
                step,
                "bernstein.audit.mismatch",
                "event_hash",
                audited_hash,
                row["event_hash"],
            )
    for index, record in sorted(by_index.items()):
        if index not in rows:
            _strict(
                result,
                index,
                "bernstein.audit.missing_from_journal",
                f"stage {record.stage_id!r}",
                f"an activity.result row at step {index}",
                "none",
            )


def _state_limits(result: RunResult, last: int | None) -> None:
    """What no check can see in this run; ``last``: the last journal index audited."""
    if result.unstored_reports:
        result.limits.append(
            f"{result.unstored_reports} research/browser report(s) are not in the store: "
            "their claims and steps cannot be re-checked (bernstein skips them too), and a "
            "removed report cannot be told from one a legacy writer never stored (research "
            "stages, browser stages not written by BrowserWorker)"
        )
    result.limits.append(
        "ts and elapsed_s are outside every hash: an edit to them cannot be detected"
    )
    rows = result.rows
    if last is None:
        result.limits.append(
            "no audit record covers this run: a cut tail cannot be told from a shorter run"
        )
    elif rows - 1 > last:
        result.limits.append(
            f"{rows - 1 - last} row(s) after the last audited activity (step {last}) could be "
            "cut or appended without trace"
        )


# ---- the audit chain's walk ------------------------------------------------------------
#
# The Python walk the Rust one (``rust/bernstein/src/audit/walk.rs``) is held to, as
# ``audit_chain.verify_audit`` made it before the walk moved to Rust. Where it raised
# instead of answering it now answers as Rust does, each place marked: nesting too deep
# for ``json.loads`` is "invalid JSON", a head UTF-8 cannot encode or an ``hmac`` that is
# not ASCII (``hmac.compare_digest`` refuses it) is an "HMAC mismatch", and an
# ``event_type`` that cannot be hashed is not an exempt event.

EXEMPT_EVENTS = frozenset({"skill.catalog.install", "skill.catalog.upgrade"})


@dataclass
class ReferenceWalk:
    records: int = 0
    problems: list[AuditProblem] = field(default_factory=list)
    walked: list[ActivityRecord] = field(default_factory=list)
    marker: str = field(default_factory=lambda: "marker-" + secrets.token_hex(16))

    @property
    def mirrors_activities(self) -> bool:
        return bool(self.walked) or any(p.run_id is not None for p in self.problems)

    def activity_of(self, run_id: str) -> list[ActivityRecord]:
        return [record for record in self.walked if record.run_id == run_id]


def walk_audit(segments: list[tuple[str, bytes]], master: bytes | None) -> ReferenceWalk:
    """Walk every segment as ``_verify_log_bytes`` does; without a key, parse only."""
    chain = ReferenceWalk()
    keys = {}
    if master is not None:
        keys = {2: (hkdf_sha256(master, b"audit"), SCHEME2_PREFIX), 1: (master, b"")}
    head = GENESIS
    for name, data in segments:
        if data and not data.endswith(b"\n"):
            chain.problems.append(AuditProblem(name, -1, "missing trailing newline", None))
        pieces = data.split(b"\n")
        if pieces and pieces[-1] == b"":
            pieces.pop()
        for number, line in enumerate(pieces):
            if not line:
                continue
            head = _check_line(chain, keys, name, number, line, head, master is not None)
    return chain


def _check_line(
    chain: ReferenceWalk,
    keys: dict[int, tuple[bytes, bytes]],
    name: str,
    number: int,
    line: bytes,
    head: str,
    keyed: bool,
) -> str:
    def problem(reason: str, run_id: str | None = None) -> None:
        chain.problems.append(AuditProblem(name, number, reason, run_id))

    try:
        record = json.loads(line)
    except UnicodeDecodeError:
        problem("undecodable bytes")
        return head
    except (ValueError, RecursionError):  # RecursionError: was raised
        problem("invalid JSON")
        return head
    if not isinstance(record, dict):
        problem("entry is not a JSON object")
        return head
    chain.records += 1
    details = record.get("details")
    details = details if isinstance(details, dict) else {}
    run_id = str(details["run_id"]) if "run_id" in details else None
    scheme = record.get("scheme", 1)
    if scheme not in (1, 2) or isinstance(scheme, bool):
        problem("unsupported audit scheme", run_id)
        return head
    # One serialisation serves both the canonical-bytes check and the HMAC body: the
    # record is dumped with its hmac replaced by a per-walk random marker, which is then
    # either put back (the line) or cut out with its member (the body).
    has_hmac = "hmac" in record
    if has_hmac:
        text = json.dumps({**record, "hmac": chain.marker}, sort_keys=True)
        member = f'"hmac": "{chain.marker}"'
        canonical = text.replace(f'"{chain.marker}"', json.dumps(record["hmac"]), 1)
        if f"{member}, " in text:
            body_text = text.replace(f"{member}, ", "", 1)
        else:
            body_text = text.replace(f", {member}", "", 1).replace(member, "", 1)
    else:
        canonical = body_text = json.dumps(record, sort_keys=True)
    if line != canonical.encode():
        problem("non-canonical line bytes", run_id)
        return head
    if record.get("event_type") == "activity.result":
        chain.walked.append(
            ActivityRecord(
                run_id=run_id or "",
                stage_id=str(details.get("stage_id", "")),
                journal_index=details.get("journal_index"),
                details=details,
                segment=name,
                line=number,
            )
        )
    stored = str(record.get("hmac", ""))
    if record.get("prev_hmac") != head:
        problem("prev_hmac mismatch", run_id)
        return stored
    if keyed:
        key, prefix = keys[int(scheme)]
        try:
            message = prefix + head.encode() + body_text.encode()
            mac = hmac.new(key, message, hashlib.sha256).hexdigest()
            matches = hmac.compare_digest(mac, stored)
        except (UnicodeEncodeError, TypeError):  # were raised
            matches = False
        if not matches:
            problem("HMAC mismatch", run_id)
            return stored
    digest = details.get("prev_chain_digest")
    event_type = record.get("event_type")
    exempt = isinstance(event_type, str) and event_type in EXEMPT_EVENTS  # was a TypeError
    if isinstance(digest, str) and digest and not exempt and digest != record.get("prev_hmac"):
        problem("prev_chain_digest does not match prev_hmac", run_id)
    return stored
