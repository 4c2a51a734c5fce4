"""Bulk verify of a workspace full of signed data/ops receipts, beside baselines in one run.

    python benches/receipts_verify.py [--runs N] [--steps S] [--json]

Each run holds S plain steps, a research stage, a data stage (2 signed inputs, a plan,
2 signed outputs) and an ops stage (1 input, 1 output): every activity crosses the
boundary, so every one has its audit record and every data/ops stage a sealed receipt.

Figures, all measured in this run on the same ledger:

- full verify (journal, blobs, receipts, audit mirror with the key) vs the same verify
  without the receipt and audit checks: what reattaching receipts costs;
- the receipts' signatures checked in one Rust batch (``_core.ed25519_verify_batch``) vs
  PyNaCl one at a time, with identical decisions.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

from nacl.exceptions import BadSignatureError
from nacl.signing import VerifyKey

from agentledger import Ledger
from agentledger.activity.receipts import check_receipt, verify_signatures
from agentledger.verify import audit as audit_check
from agentledger.verify import engine
from agentledger.verify import receipts as receipt_check


def build(path: Path, runs: int, steps: int) -> None:
    with Ledger.open(path) as ledger:
        for n in range(runs):
            run = ledger.run(f"run-{n:05d}")
            run.append_many([("step", {"n": i, "tool": "edit"}) for i in range(steps)])
            research = run.research("research-0")
            research.fetch(f"https://example.org/{n}", f"<html>page {n}</html>".encode())
            research.finish(artifact={"summary": n})
            data = run.data("data-0")
            data.add_input("a.csv", f"a,{n}\n".encode())
            data.add_input("b.csv", f"b,{n}\n".encode())
            data.plan(["join a b", {"aggregate": "sum"}])
            data.add_output("out.csv", f"sum,{n}\n".encode())
            data.add_output("report.txt", f"report {n}".encode())
            data.finish()
            ops = run.ops("ops-0")
            ops.add_input("config", f"replicas={n % 5}".encode())
            ops.plan(["scale web"])
            ops.add_output("kubectl", f"scaled {n}".encode())
            ops.finish()


def timed_verify(path: Path, checks: list[Any]) -> tuple[float, Any]:
    saved = list(engine.CHECKS)
    engine.CHECKS[:] = checks
    try:
        with Ledger.open(path) as ledger:
            started = time.perf_counter()
            report = ledger.verify()
            return time.perf_counter() - started, report
    finally:
        engine.CHECKS[:] = saved


def all_signatures(path: Path) -> list[Any]:
    pending = []
    with Ledger.open(path) as ledger:
        for entry_run in ledger.runs():
            for entry in ledger.get_run(entry_run).entries(kind="activity.result"):
                if entry.body["kind"] in ("data", "ops"):
                    doc = json.loads(ledger.blobs.get(entry.body["artifact_hash"]))
                    checked = check_receipt(
                        doc, kind=entry.body["kind"], run_id=entry.run_id,
                        stage_id=entry.body["stage_id"],
                    )  # fmt: skip
                    pending.extend(checked.signatures)
    return pending


def pynacl_one_at_a_time(pending: list[Any]) -> list[bool]:
    out = []
    for item in pending:
        try:
            VerifyKey(item.public_key).verify(item.message, item.signature)
            out.append(True)
        except BadSignatureError:
            out.append(False)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=2000)
    parser.add_argument("--steps", type=int, default=20)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        os.environ.setdefault("AGENTLEDGER_HOME", str(Path(tmp) / "keys"))
        path = Path(tmp) / "ledger.db"
        started = time.perf_counter()
        build(path, args.runs, args.steps)
        built = time.perf_counter() - started
        full_s, report = timed_verify(path, list(engine.CHECKS))
        assert report.code == 0, report.to_json()
        without = [
            c for c in engine.CHECKS
            if c not in (receipt_check.check_receipts, audit_check.check_audit)
        ]  # fmt: skip
        base_s, _ = timed_verify(path, without)
        pending = all_signatures(path)
        started = time.perf_counter()
        batch = verify_signatures(pending)
        batch_s = time.perf_counter() - started
        started = time.perf_counter()
        single = pynacl_one_at_a_time(pending)
        single_s = time.perf_counter() - started
        assert batch == single and all(batch)
    figures = {
        "runs": args.runs,
        "entries": report.entries,
        "receipts": report.receipts_checked,
        "signatures": report.signatures_checked,
        "audit_records": report.audit_records,
        "build_s": round(built, 3),
        "verify_s": round(full_s, 3),
        "verify_entries_per_s": round(report.entries / full_s),
        "verify_receipts_per_s": round(report.receipts_checked / full_s),
        "verify_without_receipts_and_audit_s": round(base_s, 3),
        "receipt_and_audit_overhead_ratio": round(full_s / base_s, 2),
        "signatures_rust_batch_s": round(batch_s, 4),
        "signatures_pynacl_single_s": round(single_s, 4),
        "rust_batch_speedup_vs_pynacl": round(single_s / batch_s, 1),
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    for name, value in figures.items():
        print(f"{name:40} {value}")


if __name__ == "__main__":
    main()
