"""bernstein 3.23.0's own code, for the benches: its wheel, its writers and its verifier.

    python benches/bernstein_peer.py fetch [--cache DIR]
    python benches/bernstein_peer.py generate OUT [--runs N] [--rows M] [--seed S] [--cache DIR]
                                                  [--writer wheel|agentledger]
    python benches/bernstein_peer.py verify WORKDIR [--cache DIR] [--reference]
    python benches/bernstein_peer.py audit WORKDIR[,WITNESS_KEY]... [--cache DIR]

``fetch`` downloads bernstein 3.23.0's wheel from PyPI (``pip download``) into the cache,
with the compiled dependencies its writers and verifier import that this virtualenv
lacks (cryptography; cbor2 for its run receipts), and unpacks them there; later calls
reuse them.

The wheel declares Python >= 3.12, but the modules that write and verify a workdir import
on 3.11 once two packages whose ``__init__`` cannot run here are registered as bare
packages (see ``BARE_PACKAGES``): their submodules then load from the wheel unchanged.

``generate`` writes a workdir with bernstein's own writers (``EventJournal``,
``ContentStore``, ``ResearchWorker``, the activity modalities, ``dispatch_activity``,
``AuditChainStore``), deterministic: a seeded generator and a fake clock. Every run shape
of ``../shared/fixtures/bernstein-3.23.0-shapes`` appears, in the proportions of ``SHAPES``.
``--writer agentledger`` writes the same shapes with ``agentledger.bernstein.writer``
instead (the fallback when the wheel cannot be had).

With the wheel's writers the workdir is then sealed as the orchestrator's shutdown seals
it (``compute_seal``, ``save_seal``, ``record_checkpoint`` under the audit key).

``audit`` is ``bernstein audit verify`` over a workdir's audit folder: the pillars that
read it (HMAC chain, Merkle seal, checkpoints, anchors, witness co-signatures, and the
lineage store's activity), run with
bernstein's own functions; the command itself cannot run on 3.11 (a later pillar's module
has 3.12-only syntax) and its other pillars read files these workdirs lack. It prints one
``AUDIT {json}`` line (``code``: 1 when a pillar fails, as the command exits; the pillars;
the in-process time).

``verify`` is bernstein's ``activity verify`` over every run of a workdir in one process:
``verify_run_activities`` with the store the CLI would open, exit codes as the CLI's
(1 not found, 2 not ok, 0 ok). It prints one ``PEER {json}`` line: the per-run codes and
the in-process times. ``--reference`` runs agentledger's plain Python reference verifier
over the workdir on disk instead (``tests/bernstein/reference.py``; where the tests are
not at hand, ``agentledger.bernstein.verifier.verify_runs``).

Only the standard library is imported at the top: ``verify`` is timed as a whole process.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import time
import types
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BERNSTEIN_VERSION = "3.23.0"
# bernstein 3.23.0 requires cryptography>=50.0.0 (Ed25519 receipts, HKDF of the audit key);
# the virtualenv has none, so the newest release at the time of writing is pinned.
CRYPTOGRAPHY_VERSION = "50.0.2"
# Its run receipts (replay.run_receipt) are also written as COSE, which imports cbor2.
CBOR2_VERSION = "6.3.0"

# Packages registered as bare modules (their folder as __path__, their __init__ never run):
# - bernstein.core.skills.catalog: its __init__ uses 3.12-only syntax, and
#   activity_modalities imports its signature module for the Ed25519 receipts;
# - bernstein.core.replay: its __init__ re-exports the replay gateway, whose imports reach
#   cbor2 (not installed) and 3.12-only syntax; only replay.journal is needed.
# Nothing else is needed: bernstein, bernstein.core and the orchestration and security
# packages import as they are.
BARE_PACKAGES = ("bernstein.core.skills.catalog", "bernstein.core.replay")

DEFAULT_CACHE = (
    Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "agentledger-bench"
)
# Bump when the generator's output changes: it is part of the cached workdir's name.
GENERATOR_VERSION = 3
DEFAULT_SEED = 20260101
AUDIT_MASTER = b"0" * 64  # bernstein's key file holds ASCII hex; used as-is, never decoded
CLOCK_EPOCH0 = 1767225600.0  # 2026-01-01T00:00:00Z
SIGNING_SEEDS = {label: hashlib.sha256(label.encode()).digest() for label in ("k1", "k2", "k3")}


# ---- the wheel --------------------------------------------------------------------------


class PeerUnavailable(RuntimeError):
    """bernstein's wheel (or its dependency) could not be had."""


@dataclass(frozen=True)
class PeerCode:
    """Where the unpacked wheel and its dependencies live."""

    code: Path
    deps: Path
    cbor: Path


def peer_dirs(cache: Path) -> PeerCode:
    return PeerCode(
        cache / f"bernstein-{BERNSTEIN_VERSION}", cache / "deps-py311", cache / "cbor2-py311"
    )


def fetch_peer(cache: Path, python: str = sys.executable) -> PeerCode:
    """Download (once) and unpack (once) the wheel and its dependencies into ``cache``."""
    import subprocess
    import zipfile

    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    peer = peer_dirs(cache)
    wanted = [
        (
            [f"bernstein=={BERNSTEIN_VERSION}", "--python-version", "3.12"],
            f"bernstein-{BERNSTEIN_VERSION}-*.whl",
            peer.code,
        ),
        (
            [f"cryptography=={CRYPTOGRAPHY_VERSION}"],
            f"cryptography-{CRYPTOGRAPHY_VERSION}-*.whl",
            peer.deps,
        ),
        ([f"cbor2=={CBOR2_VERSION}"], f"cbor2-{CBOR2_VERSION}-*.whl", peer.cbor),
    ]
    for requirement, pattern, target in wanted:
        if (target / ".unpacked").exists():
            continue
        found = sorted(wheels.glob(pattern))
        if not found:
            command = [python, "-m", "pip", "download", "--quiet", "--no-deps"]
            command += ["--only-binary=:all:", "-d", str(wheels), *requirement]
            done = subprocess.run(command, capture_output=True, text=True, check=False)
            found = sorted(wheels.glob(pattern))
            if done.returncode != 0 or not found:
                tail = (done.stderr or done.stdout).strip().splitlines()[-1:] or ["no wheel"]
                raise PeerUnavailable(f"pip download {' '.join(requirement)}: {tail[0]}")
        target.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(found[-1]) as wheel:
            wheel.extractall(target)
        (target / ".unpacked").write_text(found[-1].name + "\n")
    return peer


def install_shim(peer: PeerCode) -> None:
    """Make the wheel importable on 3.11 (see ``BARE_PACKAGES``)."""
    if not all((path / ".unpacked").exists() for path in (peer.code, peer.deps, peer.cbor)):
        raise PeerUnavailable(f"bernstein's wheel is not unpacked in {peer.code.parent}")
    sys.path[:0] = [str(peer.code), str(peer.deps), str(peer.cbor)]
    for name in BARE_PACKAGES:
        package = types.ModuleType(name)
        package.__path__ = [str(peer.code.joinpath(*name.split(".")))]
        sys.modules[name] = package


# ---- the peer verifier (timed as a whole process) ----------------------------------------


def peer_verify(workdir: Path, cache: Path, reference: bool) -> int:
    started = time.perf_counter()
    sdd = workdir / ".sdd"
    codes: dict[str, int] = {}
    if reference:
        from agentledger.bernstein.workdir import DirectoryWorkdir

        sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
        try:
            from tests.bernstein.reference import verify_runs

            verifier = "agentledger's Python reference verifier (tests/bernstein/reference.py)"
        except ImportError:
            from agentledger.bernstein.verifier import verify_runs

            verifier = "agentledger.bernstein.verifier.verify_runs (reference)"
        imported = time.perf_counter()
        directory = DirectoryWorkdir(workdir)
        results = verify_runs(directory, directory.run_ids())
        codes = {result.run_id: int(result.compat_code) for result in results}
    else:
        install_shim(peer_dirs(cache))
        from bernstein.core.orchestration.activity_modalities import (
            ContentStore,
            verify_run_activities,
        )

        imported = time.perf_counter()
        # What `bernstein activity verify RUN -w WORKDIR` does for each run.
        cas = sdd / "cas"
        store = ContentStore(cas) if cas.exists() else None
        for run_id in sorted(os.listdir(sdd / "runs")):
            try:
                result = verify_run_activities(sdd, run_id=run_id, store=store)
            except Exception:  # the command dies with a traceback: Python exits 1
                codes[run_id] = 1
                continue
            codes[run_id] = 1 if not result.found else 0 if result.ok else 2
        verifier = f"bernstein {BERNSTEIN_VERSION} verify_run_activities"
    done = time.perf_counter()
    report = {
        "verifier": verifier,
        "import_s": round(imported - started, 4),
        "verify_s": round(done - imported, 4),
        "codes": codes,
    }
    print("PEER " + json.dumps(report))
    values = set(codes.values())
    return 2 if 2 in values else 1 if 1 in values else 0


AUDIT_PILLARS = (
    "_verify_hmac_chain",
    "_verify_merkle_tree",
    "_verify_checkpoints",
    "_verify_anchors",
    "_verify_witness",
    "_verify_lineage_active_set",
)
"""``bernstein audit verify``'s pillars that read the audit folder (and the lineage
store's log), in its order."""


def install_cli_shim(peer: PeerCode) -> None:
    """What ``cli/commands/audit_cmd.py`` needs beyond ``install_shim``: its packages'
    ``__init__``s import every command (and packages absent here), and its console comes
    from a helper module that imports an HTTP client; a quiet rich console stands in."""
    import io

    from rich.console import Console

    install_shim(peer)
    for name in ("bernstein.cli", "bernstein.cli.commands"):
        package = types.ModuleType(name)
        package.__path__ = [str(peer.code.joinpath(*name.split(".")))]
        sys.modules[name] = package
    helpers = types.ModuleType("bernstein.cli.helpers")
    helpers.console = Console(file=io.StringIO(), width=200)  # type: ignore[attr-defined]
    sys.modules["bernstein.cli.helpers"] = helpers


def peer_audit(workdir: Path, witness_key: str | None) -> dict[str, Any]:
    """``bernstein audit verify [--witness-key K]`` in ``workdir`` (``install_cli_shim``
    first), with the workdir's ``audit.key``: ``{"code", "pillars", "verify_s"}``."""
    import contextlib
    import importlib
    import io

    started = time.perf_counter()
    key_file = workdir / "audit.key"
    key_file.chmod(0o600)  # bernstein refuses a key others can read
    os.environ["BERNSTEIN_AUDIT_KEY_PATH"] = str(key_file.resolve())
    os.chdir(workdir)  # the command reads .sdd/audit from the working directory
    audit_cmd = importlib.import_module("bernstein.cli.commands.audit_cmd")
    arguments: dict[str, tuple[Any, ...]] = {
        "_verify_anchors": (None,),
        "_verify_witness": (witness_key, None),
    }
    pillars: dict[str, bool | str] = {}
    for name in AUDIT_PILLARS:
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                pillars[name] = bool(getattr(audit_cmd, name)(*arguments.get(name, ())))
        except Exception as exc:  # the command dies on it: exit 1
            pillars[name] = f"raises {type(exc).__name__}"
    code = 0 if all(value is True for value in pillars.values()) else 1
    return {"code": code, "pillars": pillars, "verify_s": round(time.perf_counter() - started, 4)}


def seal_workdir(root: Path) -> None:
    """What the orchestrator's shutdown does in audit mode (``install_shim`` first)."""
    import importlib

    audit = root / ".sdd" / "audit"
    key = (root / "audit.key").read_bytes().strip()
    merkle = importlib.import_module("bernstein.core.persistence.merkle")
    checkpoints = importlib.import_module("bernstein.core.persistence.chain_checkpoint")
    _tree, seal = merkle.compute_seal(audit, key=key)
    merkle.save_seal(seal, audit / "merkle")
    checkpoints.record_checkpoint(audit, seal, key=key)


# ---- what the runs hold ------------------------------------------------------------------

# Run shapes (those of the fixture) and their share of the runs.
SHAPES = {
    "mixed": 44,
    "research-report": 10,
    "browser-report": 10,
    "dataops": 7,
    "research-legacy": 4,
    "browser-legacy": 4,
    "failed-states": 3,
    "dataops-empty": 2,
    "unicode-ids": 3,
    "jcs-v2-mixed": 5,
    "plain": 8,
}
MIXED_STAGES = {
    "research": 28,
    "browser": 26,
    "data": 10,
    "ops": 8,
    "research-legacy": 5,
    "browser-legacy": 5,
    "research-refused": 3,
    "browser-timeout": 3,
    "browser-refused": 2,
    "browser-failed": 2,
    "ops-failed": 2,
    "data-timeout": 2,
    "research-empty": 1,
    "research-redundant": 1,
    "data-empty": 1,
    "data-dup-inputs": 1,
}
# The stages each shape's activities are drawn from, with their weights.
SHAPE_STAGES: dict[str, dict[str, int]] = {
    "mixed": MIXED_STAGES,
    "research-report": {
        "research": 88,
        "research-empty": 5,
        "research-redundant": 2,
        "research-refused": 5,
    },
    "browser-report": {"browser": 85, "browser-timeout": 8, "browser-refused": 7},
    "dataops": {"data": 45, "ops": 40, "ops-failed": 8, "data-timeout": 7},
    "research-legacy": {"research-legacy": 1},
    "browser-legacy": {"browser-legacy": 1},
    "failed-states": {
        "research-refused": 30,
        "browser-failed": 25,
        "data-timeout": 20,
        "ops-failed": 15,
        "browser-refused": 10,
    },
    "dataops-empty": {"data-empty": 1, "data-dup-inputs": 1},
    "unicode-ids": MIXED_STAGES,
    "jcs-v2-mixed": MIXED_STAGES,
    "plain": {},
}
# Stages with no evidence at all, and what a second one in the same run becomes.
EMPTY_EVIDENCE = {
    "research-empty": "research-legacy",
    "browser-refused": "browser-failed",
    "data-empty": "data",
}
# The share of a run's middle rows that are activities (the rest are plain events), chosen
# so that about a third of all rows are activity.result.
ACTIVITY_SHARE = 0.36

# The words of pages, DOMs and notes (a few non-ASCII, as real pages have).
VOCABULARY = """
ledger agent plan stage claim source page verify hash chain run task tool model budget report
flow check evidence store quote citation replay audit signer receipt input output dataset join
window metric latency cache shard café naïve 日本語 Ωmega résumé
"""
PLAIN_EVENTS = ("task_claimed", "tool_call", "model.decision", "task_progress")
UNICODE_EVENTS = ("événement.ünïcödé", "😀.emoji", "evt with space", "")
KITCHEN_SINK = {
    "floats": [0.1, 1e-07, 1e16, 1e15, -0.0, 1.0, 5e-324, 1e22, 0.30000000000000004],
    "ints": [9007199254740993, -9223372036854775808, 18446744073709551616, 10**30],
    "strs": ["é", "e\u0301", "😀", "\u2028line\u2029", "\x00nul\x1f\x7f", '"q" \\ /'],
    "order": {"b": 1, "a": 2, "\uffff": 3, "😀": 4, "\ue000": 5, "10": 6, "9": 7},
}


@dataclass
class Flow:
    """A browser flow: steps (action kind, target, typed value, screenshot, DOM), an optional
    terminal capture, and checks (id, kind, operand, step index)."""

    flow_id: str
    start_url: str
    steps: list[tuple[str, str, str, bytes, bytes]]
    checks: list[tuple[str, str, str, int]]


@dataclass
class Tally:
    """What a generated workdir holds, written to its manifest."""

    run_shapes: dict[str, str] = field(default_factory=dict)
    shapes: Counter[str] = field(default_factory=Counter)
    stages: Counter[str] = field(default_factory=Counter)
    rows: int = 0
    activity_rows: int = 0
    refused_redundant: int = 0


# ---- the writers -------------------------------------------------------------------------


class FakeClock:
    """Every reading advances a little; ``skip`` jumps (between runs)."""

    def __init__(self, seed: int) -> None:
        import random

        self.now = CLOCK_EPOCH0
        self._rng = random.Random(seed)

    def time(self) -> float:
        self.now += self._rng.uniform(0.0002, 0.004)
        return self.now

    def skip(self, seconds: float) -> None:
        self.now += seconds


class WheelWriters:
    """bernstein's own writers, imported from the wheel, on a fake clock."""

    label = f"bernstein {BERNSTEIN_VERSION}'s own writers (from the PyPI wheel)"
    notes: tuple[str, ...] = ()

    def __init__(self, root: Path, clock: FakeClock) -> None:
        import importlib
        from datetime import datetime

        # By full name: ``from package import module`` would first ask the orchestration
        # and security packages' lazy ``__getattr__``, which imports every sibling module.
        def load(name: str) -> Any:
            return importlib.import_module(f"bernstein.core.{name}")

        journal, audit = load("replay.journal"), load("security.audit")
        self.journal_module = journal
        self.activity = load("orchestration.activity")
        self.modalities = load("orchestration.activity_modalities")
        self.research_worker = load("orchestration.research_worker")
        self.check = load("orchestration.browser_check")
        self.computer_use = load("agents.computer_use")

        class ClockDatetime(datetime):
            @classmethod
            def now(cls, tz: Any = None) -> datetime:
                return datetime.fromtimestamp(clock.time(), tz)

        # The writers read the wall clock through these module globals only.
        journal.time = types.SimpleNamespace(time=clock.time)
        audit.datetime = ClockDatetime
        os.environ.pop(journal.RETENTION_ENV_VAR, None)  # keep every run
        # The scheduler warns on each stage its ledger refuses; the generator counts them.
        logging.getLogger("bernstein").setLevel(logging.ERROR)

        self.sdd = root / ".sdd"
        self.store = self.modalities.ContentStore(self.sdd / "cas")
        self.chain = load("security.audit_chain").AuditChainStore(
            self.sdd / "audit", key=AUDIT_MASTER
        )
        self.keys = {label: self._pem_pair(seed) for label, seed in SIGNING_SEEDS.items()}
        self.journal: Any = None
        self.redundancy: Any = None

    @staticmethod
    def _pem_pair(seed: bytes) -> tuple[str, str]:
        from cryptography.hazmat.primitives import serialization as ser
        from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey

        key = Ed25519PrivateKey.from_private_bytes(seed)
        private = key.private_bytes(
            ser.Encoding.PEM, ser.PrivateFormat.PKCS8, ser.NoEncryption()
        ).decode()
        public = (
            key.public_key()
            .public_bytes(ser.Encoding.PEM, ser.PublicFormat.SubjectPublicKeyInfo)
            .decode()
        )
        return private, public

    def start_run(self, run_id: str, jcs: bool) -> None:
        journal = self.journal_module
        profile = journal.HASH_PROFILE_JCS_V2 if jcs else journal.HASH_PROFILE_LEGACY
        self.journal = journal.EventJournal(run_id, self.sdd, hash_profile=profile)
        self.redundancy = self.activity.RedundancyLedger()

    def event(self, name: str, payload: dict[str, Any]) -> None:
        self.journal.record(name, **payload)

    def finish_run(self) -> None:
        self.journal = None

    def _dispatch(self, stage_id: str, result: Any) -> bool:
        try:
            self.activity.dispatch_activity(
                result,
                stage_id=stage_id,
                journal=self.journal,
                chain=self.chain,
                redundancy_ledger=self.redundancy,
            )
        except self.activity.RedundantEvidenceRefused:
            # What bernstein's scheduler logs when its ledger refuses a stage.
            self.event(
                "stage.refused_redundant",
                {"stage_id": stage_id, "evidence_set_hash": result.evidence_set_hash},
            )
            return False
        return True

    def _state(self, state: str) -> Any:
        return self.activity.TerminalState(state)

    def research(
        self,
        stage_id: str,
        query: str,
        pages: list[tuple[str, bytes]],
        claims: list[tuple[str, str, list[tuple[str, str]]]] | None,
        artifact: dict[str, Any] | None = None,
        state: str = "completed",
        reason: str = "ok",
    ) -> bool:
        if claims is not None:
            # The research worker fetches, binds every quote to a fetched page, stores the
            # report under its artifact hash and builds the result.
            worker_module = self.research_worker
            by_ref = dict(pages)
            drafts = [
                worker_module.ClaimDraft(
                    statement=statement,
                    spans=tuple(worker_module.SpanRef(source_ref=r, quote=q) for r, q in spans),
                    claim_id=claim_id,
                )
                for claim_id, statement, spans in claims
            ]
            worker = worker_module.ResearchWorker(
                store=self.store, budget=worker_module.ResearchBudget(max_fetches=len(pages))
            )
            run = worker.run(
                query=query,
                sources=[ref for ref, _ in pages],
                fetch_fn=by_ref.__getitem__,
                synthesise=lambda _query, _fetched: drafts,
                summary=f"findings for {query}",
            )
            return self._dispatch(stage_id, run.result)
        collector = self.modalities.ResearchActivity(store=self.store)
        for ref, content in pages:
            collector.fetch(ref, content)
        result = collector.finish(
            artifact=artifact, terminal_state=self._state(state), reason_code=reason
        )
        return self._dispatch(stage_id, result)

    def browser(
        self,
        stage_id: str,
        flow: Flow | None,
        observations: list[tuple[str, str, bytes]],
        artifact: dict[str, Any] | None = None,
        state: str = "completed",
        reason: str = "ok",
    ) -> bool:
        collector = self.modalities.BrowserActivity(store=self.store)
        if flow is None:
            for kind, ref, content in observations:
                if kind == "snapshot":
                    collector.observe(step=ref, snapshot=content)
                else:
                    collector.receipt(step=ref, receipt=content)
            result = collector.finish(
                artifact=artifact, terminal_state=self._state(state), reason_code=reason
            )
            return self._dispatch(stage_id, result)
        # What the browser worker's flow session does per step (browser_worker.py, whose
        # module needs 3.12): observe, anchor, store the action receipt, evaluate checks.
        check, cu = self.check, self.computer_use
        records, head, doms = [], cu.GENESIS_ANCHOR, []
        for index, (kind, target, typed, screenshot, dom) in enumerate(flow.steps):
            shot = collector.observe(step=f"{index}:screenshot", snapshot=screenshot)
            page = collector.observe(step=f"{index}:dom", snapshot=dom)
            action = cu.Action(
                kind=cu.ActionKind(kind),
                target=target,
                value_digest=cu.digest_typed_value(typed) if typed else "",
            )
            record = check.build_step_record(
                index=index,
                prev_anchor=head,
                action=action,
                screenshot_content_hash=shot.content_hash,
                dom_content_hash=page.content_hash,
                screenshot_bytes=screenshot,
                dom_bytes=dom,
            )
            preimage = cu.action_anchor_preimage(
                prev_anchor=record.prev_anchor,
                observation_hash=record.observation_hash,
                action=action,
            )
            collector.receipt(
                step=f"{index}:action", receipt=preimage + b"\n" + record.anchor.encode()
            )
            records.append(record)
            doms.append(dom)
            head = record.anchor
        checks = [
            check.BrowserCheckRecord(
                check_id=check_id,
                kind=check.CheckKind(kind),
                operand=operand,
                step_index=step,
                passed=check.evaluate_check(
                    kind=check.CheckKind(kind),
                    operand=operand,
                    dom_bytes=doms[step],
                    screenshot_content_hash=records[step].screenshot_content_hash,
                ),
            )
            for check_id, kind, operand, step in flow.checks
        ]
        report = check.validate_browser_flow_report(
            check.BrowserFlowReport(
                flow_id=flow.flow_id,
                start_url=flow.start_url,
                steps=tuple(records),
                checks=tuple(checks),
                head_anchor=head,
            )
        )
        if state == "completed" and any(not c.passed for c in checks):
            reason = "checks_failed"
        self.store.put(check.report_to_canonical_bytes(report))
        result = collector.finish(
            artifact=report.to_dict(), terminal_state=self._state(state), reason_code=reason
        )
        return self._dispatch(stage_id, result)

    def dataops(
        self,
        stage_id: str,
        kind: str,
        signer: str,
        inputs: list[tuple[str, bytes]],
        steps: list[str],
        outputs: list[tuple[str, bytes]],
        state: str = "completed",
        reason: str = "ok",
    ) -> bool:
        private, public = self.keys[signer]
        modality = self.modalities.DataActivity if kind == "data" else self.modalities.OpsActivity
        collector = modality(store=self.store, private_key_pem=private, public_key_pem=public)
        for ref, content in inputs:
            collector.add_input(ref=ref, content=content)
        collector.plan(steps)
        for ref, content in outputs:
            collector.add_output(ref=ref, content=content)
        result = collector.finish(terminal_state=self._state(state), reason_code=reason)
        return self._dispatch(stage_id, result)

    def audit_verdict(self) -> tuple[bool, list[str]]:
        from bernstein.core.security.audit_chain import AuditChainStore

        ok, errors = AuditChainStore(self.sdd / "audit", key=AUDIT_MASTER).verify()
        return bool(ok), list(errors)[:5]


class LedgerWriters:
    """The same shapes with ``agentledger.bernstein.writer`` (no bernstein code at all)."""

    label = "agentledger.bernstein.writer.WorkdirWriter (fallback: bernstein's wheel unavailable)"
    notes = ("jcs-v2-mixed runs are written in py-json-v1: the fallback writer has no jcs-v2",)

    def __init__(self, root: Path, clock: FakeClock) -> None:
        from agentledger.bernstein import format as fmt
        from agentledger.bernstein import writer

        self.fmt, self.writer = fmt, writer
        self.workdir = writer.WorkdirWriter(root, audit_master=AUDIT_MASTER)
        self.run: Any = None
        self.seen: set[str] = set()

    def start_run(self, run_id: str, jcs: bool) -> None:
        self.run, self.seen = self.workdir.run(run_id), set()

    def event(self, name: str, payload: dict[str, Any]) -> None:
        self.run.record(name, **payload)

    def finish_run(self) -> None:
        self.run.close()

    def _activity(
        self,
        stage_id: str,
        kind: str,
        artifact: Any,
        observations: list[tuple[str, str, bytes]],
        state: str,
        reason: str,
        store_artifact: bool,
    ) -> bool:
        fmt = self.fmt
        hashes = sorted({fmt.content_hash(data) for _, _, data in observations})
        evidence = fmt.content_hash(fmt.acanon(hashes))
        if evidence in self.seen:
            self.event(
                "stage.refused_redundant", {"stage_id": stage_id, "evidence_set_hash": evidence}
            )
            return False
        self.seen.add(evidence)
        self.run.activity(stage_id, kind, artifact, observations, state, reason, store_artifact)
        return True

    def research(
        self,
        stage_id: str,
        query: str,
        pages: list[tuple[str, bytes]],
        claims: list[tuple[str, str, list[tuple[str, str]]]] | None,
        artifact: dict[str, Any] | None = None,
        state: str = "completed",
        reason: str = "ok",
    ) -> bool:
        observations = [("page", ref, content) for ref, content in pages]
        if claims is None:
            return self._activity(
                stage_id, "research", artifact, observations, state, reason, False
            )
        hashes = {ref: self.fmt.content_hash(content) for ref, content in pages}
        report = {
            "query": query,
            "summary": f"findings for {query}",
            "claims": [
                {
                    "claim_id": claim_id,
                    "statement": statement,
                    "citations": [
                        {
                            "claim_id": claim_id,
                            "quote": quote,
                            "source_ref": ref,
                            "page_content_hash": hashes[ref],
                        }
                        for ref, quote in spans
                    ],
                }
                for claim_id, statement, spans in claims
            ],
        }
        return self._activity(stage_id, "research", report, observations, state, reason, True)

    def browser(
        self,
        stage_id: str,
        flow: Flow | None,
        observations: list[tuple[str, str, bytes]],
        artifact: dict[str, Any] | None = None,
        state: str = "completed",
        reason: str = "ok",
    ) -> bool:
        if flow is None:
            return self._activity(stage_id, "browser", artifact, observations, state, reason, False)
        sha = hashlib.sha256
        steps, captured, head, doms = [], [], "", []
        for index, (kind, target, typed, screenshot, dom) in enumerate(flow.steps):
            dom_digest = sha(b" ".join(dom.split())).hexdigest()
            observation_hash = sha(screenshot + dom_digest.encode()).hexdigest()
            action = {
                "kind": kind,
                "target": target,
                "value_digest": sha(typed.encode()).hexdigest() if typed else "",
            }
            preimage = self.fmt.acanon(
                {"prev_anchor": head, "observation_hash": observation_hash, "action": action}
            )
            anchor = sha(preimage).hexdigest()
            steps.append(
                {
                    "index": index,
                    "action_kind": kind,
                    "action_target": target,
                    "action_value_digest": action["value_digest"],
                    "screenshot_content_hash": self.fmt.content_hash(screenshot),
                    "dom_content_hash": self.fmt.content_hash(dom),
                    "dom_digest": dom_digest,
                    "observation_hash": observation_hash,
                    "prev_anchor": head,
                    "anchor": anchor,
                }
            )
            captured += [
                ("snapshot", f"{index}:screenshot", screenshot),
                ("snapshot", f"{index}:dom", dom),
                ("action_receipt", f"{index}:action", preimage + b"\n" + anchor.encode()),
            ]
            doms.append(dom)
            head = anchor
        checks = []
        for check_id, kind, operand, step in flow.checks:
            if kind == "screenshot_hash_equals":
                passed = steps[step]["screenshot_content_hash"] == operand
            else:
                present = b" ".join(operand.encode().split()) in b" ".join(doms[step].split())
                passed = present if kind == "dom_contains" else not present
            checks.append(
                {
                    "check_id": check_id,
                    "kind": kind,
                    "operand": operand,
                    "step_index": step,
                    "passed": passed,
                }
            )
        if state == "completed" and not all(c["passed"] for c in checks):
            reason = "checks_failed"
        report = {
            "flow_id": flow.flow_id,
            "start_url": flow.start_url,
            "steps": steps,
            "checks": checks,
            "head_anchor": head,
        }
        return self._activity(stage_id, "browser", report, captured, state, reason, True)

    def dataops(
        self,
        stage_id: str,
        kind: str,
        signer: str,
        inputs: list[tuple[str, bytes]],
        steps: list[str],
        outputs: list[tuple[str, bytes]],
        state: str = "completed",
        reason: str = "ok",
    ) -> bool:
        receipt = self.writer.sign_receipt(kind, inputs, outputs, steps, SIGNING_SEEDS[signer])
        observations = [("input", r, d) for r, d in inputs] + [("output", r, d) for r, d in outputs]
        return self._activity(stage_id, kind, receipt, observations, state, reason, True)

    def audit_verdict(self) -> tuple[bool, list[str]]:
        return True, ["not checked by bernstein (fallback writer)"]


# ---- the generator -----------------------------------------------------------------------


class RunGenerator:
    """Draws each run's content from one seeded generator and hands it to the writers."""

    def __init__(self, writers: Any, seed: int) -> None:
        import random

        self.w = writers
        self.rng = random.Random(seed)
        self.words = VOCABULARY.split()
        self.tally = Tally()
        self.last_pages: list[tuple[str, bytes]] = []
        self.empty_used = False

    # -- content --
    def sentence(self, low: int = 6, high: int = 14) -> str:
        words = self.rng.choices(self.words, k=self.rng.randint(low, high))
        return " ".join(words).capitalize() + "."

    def page(self, url: str) -> bytes:
        paragraphs = [
            " ".join(self.sentence() for _ in range(self.rng.randint(2, 5)))
            for _ in range(self.rng.randint(2, 5))
        ]
        body = "".join(f"<p>{p}</p>\n" for p in paragraphs)
        return f"<html><head><title>{url}</title></head><body>\n{body}</body></html>\n".encode()

    def quote(self, page: bytes) -> str:
        """A sentence of the page, as a synthesiser would quote it."""
        paragraph = self.rng.choice(page.decode().split("<p>")[1:]).split("</p>", 1)[0]
        return self.rng.choice(paragraph.split(". "))

    def dom(self, step: int, marker: str) -> bytes:
        indent = " " * self.rng.randint(0, 4)
        lines = [f"{indent}<p>{self.sentence()}</p>" for _ in range(self.rng.randint(2, 6))]
        body = "\n".join(lines)
        html = (
            f"<html>\n<body>\n  <h1>Step {step} — {marker}</h1>\n{body}\n  <button>Submit</button>"
        )
        return (html + "\n</body>\n</html>\n").encode()

    def screenshot(self) -> bytes:
        return b"\x89PNG\r\n\x1a\n" + self.rng.randbytes(self.rng.randint(300, 1200))

    def csv(self, rows: int) -> bytes:
        lines = ["id,amount,ccy,day"] + [
            f"{i},{self.rng.uniform(0, 5000):.2f},{self.rng.choice(['EUR', 'USD', 'JPY'])},"
            f"2026-01-{self.rng.randint(1, 28):02d}"
            for i in range(rows)
        ]
        return ("\n".join(lines) + "\n").encode()

    def plain_payload(self, name: str, n: int) -> dict[str, Any]:
        rng = self.rng
        if name == "task_claimed":
            return {"task_id": f"T-{n}", "agent": rng.choice(["claude", "codex", "gemini"])}
        if name == "tool_call":
            return {
                "tool": rng.choice(["edit", "read", "bash", "grep"]),
                "path": f"src/mod_{rng.randint(0, 40)}.py",
                "n": n,
                "ok": rng.random() > 0.05,
                "cost": round(rng.random() * 0.02, 6),
            }
        if name == "model.decision":
            return {
                "model": rng.choice(["m-large", "m-small"]),
                "tokens_in": rng.randint(200, 90000),
                "tokens_out": rng.randint(10, 4000),
                "latency_ms": rng.uniform(80, 4000),
                "choice": self.sentence(3, 8),
            }
        return {"task_id": f"T-{n}", "pct": round(rng.uniform(0, 100), 1), "note": self.sentence()}

    # -- stages: each returns whether the stage was journalled as an activity --
    def stage(self, recipe: str, stage_id: str, run_id: str) -> bool:
        """Write one stage; False when bernstein's ledger refused it as redundant."""
        if recipe in EMPTY_EVIDENCE:
            # One stage with no evidence per run; a second would only be refused by the ledger.
            if self.empty_used:
                recipe = EMPTY_EVIDENCE[recipe]
            self.empty_used = True
        admitted = self._write_stage(recipe, stage_id, f"https://example.org/{run_id}/{stage_id}")
        self.tally.stages[recipe if admitted else "refused_redundant"] += 1
        self.tally.refused_redundant += not admitted
        return admitted

    def _write_stage(self, recipe: str, stage_id: str, url: str) -> bool:
        rng, w = self.rng, self.w
        if recipe in ("research", "research-legacy", "research-redundant"):
            if recipe == "research-redundant" and self.last_pages:
                pages = self.last_pages  # the same evidence again: the ledger refuses it
            else:
                pages = [
                    (f"{url}/p{k}", self.page(f"{url}/p{k}")) for k in range(rng.randint(2, 4))
                ]
                if rng.random() < 0.1:  # the same bytes fetched under another ref
                    pages.append((pages[0][0] + "?mirror=1", pages[0][1]))
                self.last_pages = pages
            if recipe == "research-legacy":
                artifact = {"claims": [self.sentence() for _ in range(3)], "summary": "legacy"}
                return w.research(stage_id, f"q {stage_id}", pages, None, artifact)
            claims = []
            for c in range(rng.randint(1, 3)):
                cited = rng.sample(pages, k=min(len(pages), rng.randint(1, 2)))
                spans = [(ref, self.quote(content)) for ref, content in cited]
                claims.append((f"claim-{c}", self.sentence(4, 9), spans))
            return w.research(stage_id, f"q {stage_id}", pages, claims)
        if recipe == "research-empty":
            return w.research(stage_id, "q", [], None, {"claims": [], "summary": "nothing found"})
        if recipe == "research-refused":
            pages = [(f"{url}/p0", self.page(url))]
            state, reason = rng.choice(
                [("refused", "policy_denied"), ("failed", "sérieux_失败"), ("refused", "budget")]
            )
            artifact = {"query": f"q {stage_id}", "error": reason}
            return w.research(stage_id, "q", pages, None, artifact, state, reason)
        if recipe in ("browser", "browser-timeout"):
            flow = self.flow(stage_id, url, recipe == "browser-timeout")
            if recipe == "browser-timeout":
                return w.browser(stage_id, flow, [], None, "timed_out", "driver_timeout")
            return w.browser(stage_id, flow, [])
        if recipe == "browser-refused":
            artifact = {"flow": "legacy-flow", "verdict": "fail"}
            return w.browser(stage_id, None, [], artifact, "refused", "driver_unavailable")
        if recipe in ("browser-legacy", "browser-failed"):
            # BrowserActivity driven directly, as in the fixture: raw snapshot and receipt
            # bytes (binary, HTML, JSON, text) under the caller's own step names.
            observations = []
            for step in range(rng.randint(1, 3)):
                snapshot = self.screenshot() if rng.random() < 0.5 else self.dom(step, "legacy")
                observations.append(("snapshot", f"step-{step}", snapshot))
                if rng.random() < 0.6:
                    receipt = json.dumps({"step": step, "click": f"#b{step}"}).encode()
                    if rng.random() < 0.3:
                        receipt = f"clicked #b{step}\n".encode()
                    observations.append(("action_receipt", f"step-{step}", receipt))
            if recipe == "browser-failed":
                artifact = {"flow": "legacy-flow", "verdict": "error"}
                return w.browser(stage_id, None, observations, artifact, "failed", "driver_error")
            state, reason = (
                ("timed_out", "driver_timeout") if rng.random() < 0.1 else ("completed", "ok")
            )
            artifact = {"flow": "legacy-flow", "verdict": "pass"}
            return w.browser(stage_id, None, observations, artifact, state, reason)
        signer = rng.choice(list(SIGNING_SEEDS))
        if recipe in ("data", "ops", "ops-failed", "data-timeout"):
            kind = "data" if recipe.startswith("data") else "ops"
            inputs = [
                (f"datasets/{stage_id}/in{k}.csv", self.csv(rng.randint(5, 30)))
                for k in range(rng.randint(1, 3))
            ]
            steps = [
                rng.choice(["load", "join orders fx on ccy", "sum amount by day", "dedupe"])
                for _ in range(rng.randint(1, 4))
            ]
            outputs = [
                (f"out/{stage_id}/out{k}.csv", self.csv(rng.randint(3, 20)))
                for k in range(rng.randint(0 if kind == "ops" else 1, 2))
            ]
            if recipe == "data-timeout":
                return w.dataops(
                    stage_id, kind, signer, inputs, steps, [], "timed_out", "budget_exhausted"
                )
            if recipe == "ops-failed":
                return w.dataops(
                    stage_id, kind, signer, inputs, steps, outputs[:1], "failed", "apply_failed"
                )
            return w.dataops(stage_id, kind, signer, inputs, steps, outputs)
        if recipe == "data-empty":
            return w.dataops(stage_id, "data", signer, [], [], [])
        # data-dup-inputs: the same input bytes under two refs
        content = self.csv(4)
        inputs = [("a.csv", content), ("copy/a.csv", content)]
        return w.dataops(stage_id, "data", signer, inputs, ["", "", "😀"], [("b.csv", content)])

    def flow(self, stage_id: str, url: str, timed_out: bool) -> Flow:
        rng = self.rng
        marker = rng.choice(["café", "checkout", "dashboard", "日本語"])
        steps: list[tuple[str, str, str, bytes, bytes]] = [
            ("navigate", url, "", self.screenshot(), self.dom(0, marker))
        ]
        for index in range(1, rng.randint(1, 3)):
            kind = rng.choice(["click", "type", "scroll", "select", "submit", "key"])
            typed = self.sentence(1, 3) if kind == "type" else ""
            steps.append(
                (kind, f"#field-{index}", typed, self.screenshot(), self.dom(index, marker))
            )
        if not timed_out:  # the terminal capture after the last action
            steps.append(("screenshot", "", "", self.screenshot(), self.dom(len(steps), marker)))
        last, pinned = len(steps) - 1, rng.randrange(len(steps))
        shot = "sha256:" + hashlib.sha256(steps[pinned][3]).hexdigest()
        checks = [
            ("chk-0", "dom_contains", marker, 0),
            ("chk-1", "dom_not_contains", "error", last),
            ("chk-2", "screenshot_hash_equals", shot, pinned),
        ]
        if rng.random() < 0.25:  # a recorded failing check: reason checks_failed, exit 0
            checks.append(("chk-3", "dom_contains", "«missing»", last))
        return Flow(f"flow-{stage_id}", url, steps, checks)

    # -- runs --
    def run_id(self, n: int, shape: str) -> str:
        run_id = f"r{n:05d}-{shape}"
        if shape == "unicode-ids":  # the longest run id bernstein accepts
            run_id = (run_id + "_max.len-").ljust(64, "x")
        return run_id

    def write_run(self, n: int, shape: str, rows: int) -> None:
        rng, w, tally = self.rng, self.w, self.tally
        run_id = self.run_id(n, shape)
        w.start_run(run_id, jcs=shape == "jcs-v2-mixed")
        self.last_pages, self.empty_used = [], False
        start: dict[str, Any] = {"goal": self.sentence(), "plan_hash": "sha256:" + "ab" * 32}
        if shape != "jcs-v2-mixed" and rng.random() < 0.05:
            start["kitchen_sink"] = KITCHEN_SINK
        w.event("run_started", start)
        stages = SHAPE_STAGES[shape]
        recipes, weights = list(stages), list(stages.values())
        middle = max(rows - 2, 1)
        forced = rng.randrange(middle) if stages else -1  # every activity run has one
        activities = 0
        for slot in range(middle):
            if stages and (slot == forced or rng.random() < ACTIVITY_SHARE):
                recipe = rng.choices(recipes, weights)[0]
                stage_id = f"{recipe.split('-')[0]}-{slot}"
                if shape == "unicode-ids":
                    stage_id = rng.choice(["étape", "阶段", "stage-😀"]) + f"-{slot}"
                activities += self.stage(recipe, stage_id, run_id)
                continue
            names = PLAIN_EVENTS + (UNICODE_EVENTS if shape == "unicode-ids" else ())
            name = rng.choice(names)
            w.event(name, self.plain_payload(name, slot))
        w.event("run_finished", {"status": "ok", "activities": activities})
        w.finish_run()
        tally.run_shapes[run_id] = shape
        tally.shapes[shape] += 1
        tally.rows += middle + 2
        tally.activity_rows += activities

    def shapes(self, runs: int) -> list[str]:
        """Every shape once (even a small workdir has them all), the rest by weight."""
        names = list(SHAPES)
        drawn = names[:runs] + self.rng.choices(names, list(SHAPES.values()), k=runs - len(names))
        self.rng.shuffle(drawn)
        return drawn


def generate(
    out: Path, runs: int, rows: int, seed: int, writer: str, cache: Path
) -> dict[str, Any]:
    """Write the workdir ``out`` and its ``manifest.json``; return the manifest."""
    started = time.perf_counter()
    clock = FakeClock(seed)
    if writer == "wheel":
        install_shim(peer_dirs(cache))
        writers: Any = WheelWriters(out, clock)
    else:
        writers = LedgerWriters(out, clock)
    generator = RunGenerator(writers, seed)
    states: Counter[str] = Counter()
    for n, shape in enumerate(generator.shapes(runs)):
        generator.write_run(n, shape, rows)
        clock.skip(generator.rng.uniform(60, 600))  # runs spread over days: several audit files
    (out / "audit.key").write_bytes(AUDIT_MASTER)
    audit_ok, audit_errors = writers.audit_verdict()
    if writer == "wheel":
        seal_workdir(out)
    audit_records = 0
    for day in sorted((out / ".sdd" / "audit").glob("*.jsonl")):
        for line in day.read_bytes().splitlines():
            audit_records += 1
            states[json.loads(line)["details"]["terminal_state"]] += 1
    tally = generator.tally
    manifest = {
        "writer": writers.label,
        "notes": list(writers.notes),
        "bernstein_version": BERNSTEIN_VERSION,
        "runs": runs,
        "rows_per_run": rows,
        "seed": seed,
        "generator_version": GENERATOR_VERSION,
        "rows": tally.rows,
        "activity_rows": tally.activity_rows,
        "activity_share": round(tally.activity_rows / tally.rows, 3),
        "refused_redundant": tally.refused_redundant,
        "shapes": dict(sorted(tally.shapes.items())),
        "stages": dict(sorted(tally.stages.items())),
        "terminal_states": dict(sorted(states.items())),
        "blobs": sum(1 for _ in (out / ".sdd" / "cas").iterdir()),
        "audit_files": len(list((out / ".sdd" / "audit").glob("*.jsonl"))),
        "audit_records": audit_records,
        "audit_ok": audit_ok,
        "sealed": writer == "wheel",
        "audit_errors": audit_errors,
        "trust": [f"ed25519:{_public_hex(seed)}" for seed in SIGNING_SEEDS.values()],
        "generate_s": round(time.perf_counter() - started, 1),
        "run_shapes": tally.run_shapes,
    }
    (out / "manifest.json").write_text(json.dumps(manifest, indent=2, ensure_ascii=False) + "\n")
    return manifest


def _public_hex(seed: bytes) -> str:
    from nacl.signing import SigningKey

    return bytes(SigningKey(seed).verify_key).hex()


def workdir_name(runs: int, rows: int, seed: int, writer: str) -> str:
    return f"workdir-{writer}-{runs}x{rows}-seed{seed}-g{GENERATOR_VERSION}"


def ensure_workdir(
    cache: Path, runs: int, rows: int, seed: int, writer: str, python: str = sys.executable
) -> tuple[Path, dict[str, Any], bool]:
    """The cached workdir for these parameters, generated (in a child process) if absent.

    Returns ``(workdir, manifest, generated_now)``.
    """
    import shutil
    import subprocess

    workdir = cache / workdir_name(runs, rows, seed, writer)
    manifest_path = workdir / "manifest.json"
    if manifest_path.exists():
        return workdir, json.loads(manifest_path.read_text()), False
    partial = workdir.with_name(workdir.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    command = [python, str(Path(__file__).resolve()), "generate", str(partial)]
    command += ["--runs", str(runs), "--rows", str(rows), "--seed", str(seed)]
    command += ["--writer", writer, "--cache", str(cache)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)  # the manifest is saved
    partial.rename(workdir)
    return workdir, json.loads(manifest_path.read_text()), True


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    fetch = commands.add_parser("fetch", help="download and unpack the wheel (once)")
    gen = commands.add_parser("generate", help="write a workdir with bernstein's writers")
    gen.add_argument("out", type=Path)
    gen.add_argument("--runs", type=int, default=2000)
    gen.add_argument("--rows", type=int, default=100)
    gen.add_argument("--seed", type=int, default=DEFAULT_SEED)
    gen.add_argument("--writer", choices=["wheel", "agentledger"], default="wheel")
    ver = commands.add_parser("verify", help="bernstein's verifier over every run")
    ver.add_argument("workdir", type=Path)
    ver.add_argument("--reference", action="store_true")
    aud = commands.add_parser("audit", help="bernstein's audit verify pillars, per workdir")
    aud.add_argument("specs", nargs="+", metavar="WORKDIR[,WITNESS_KEY]")
    for command in (fetch, gen, ver, aud):
        command.add_argument("--cache", type=Path, default=DEFAULT_CACHE)
    args = parser.parse_args()
    if args.command == "fetch":
        peer = fetch_peer(args.cache)
        print(f"bernstein {BERNSTEIN_VERSION}: {peer.code}")
        print(f"cryptography {CRYPTOGRAPHY_VERSION}: {peer.deps}")
        print(f"cbor2 {CBOR2_VERSION}: {peer.cbor}")
    elif args.command == "generate":
        manifest = generate(args.out, args.runs, args.rows, args.seed, args.writer, args.cache)
        print(json.dumps({k: v for k, v in manifest.items() if k != "run_shapes"}, indent=2))
    elif args.command == "audit":
        install_cli_shim(peer_dirs(args.cache))
        for spec in args.specs:
            workdir, _, witness_key = spec.partition(",")
            report = peer_audit(Path(workdir).resolve(), witness_key or None)
            print("AUDIT " + json.dumps(report), flush=True)
    else:
        sys.exit(peer_verify(args.workdir, args.cache, args.reference))


if __name__ == "__main__":
    main()
