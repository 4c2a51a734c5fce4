"""bernstein workdirs: import time, and bulk verify against a straightforward Python
verifier of bernstein's semantics, side by side in one run.

    python benches/bernstein_verify.py [--runs N] [--rows M] [--jobs J] [--repeat R] [--json]

A workdir of N runs x M rows is generated in bernstein's format (a third of the rows
``activity.result``: research pages, browser snapshots, and data/ops stages
with a signed receipt in 3% of them), with its HMAC audit chain. Then:

(a) ``import bernstein`` into a fresh ledger (timed);
(b) the baseline: bernstein's ``activity verify`` semantics, one run after the other,
    in plain Python (json, hashlib, cryptography), reading the workdir on disk;
(c) ``ledger.verify(runs, compat="bernstein")`` over the imported runs (one Rust pass
    reads the journals, receipts and blobs from SQLite while a thread pool verifies them;
    clean runs never reach Python stage by stage), and the strict mode.

(b) and (c) are sampled R times, alternately, and each keeps its best time. Both
verifiers must return the same exit code for every run; the ratio (b)/(c) is printed.
"""

from __future__ import annotations

import argparse
import base64
import binascii
import hashlib
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from agentledger import Ledger
from agentledger.bernstein import import_workdir
from agentledger.bernstein.writer import WorkdirWriter, sign_receipt
from agentledger.verify import VerifyOptions

AUDIT_MASTER = b"0" * 64
SIGNING_SEED = hashlib.sha256(b"bench-signer").digest()


def generate(root: Path, runs: int, rows: int) -> None:
    rng = random.Random(7)
    writer = WorkdirWriter(root, audit_master=AUDIT_MASTER)
    for n in range(runs):
        run = writer.run(f"run-{n:06d}")
        run.record(
            "run_started", goal=f"goal {n} \u2014 caf\u00e9", plan_hash="sha256:" + "ab" * 32
        )
        for i in range(1, rows - 1):
            if i % 3 != 2:
                run.record(
                    "tool_call", n=i, tool="edit", path=f"src/f{i % 17}.py", cost=rng.random()
                )
                continue
            stage = f"stage-{i}"
            choice = rng.random()
            if choice < 0.03:
                inputs = [(f"in/{n}/{i}", rng.randbytes(64))]
                outputs = [(f"out/{n}/{i}", rng.randbytes(64))]
                receipt = sign_receipt("data", inputs, outputs, ["load", "join"], SIGNING_SEED)
                observations = [("input", r, d) for r, d in inputs] + [
                    ("output", r, d) for r, d in outputs
                ]
                run.activity(stage, "data", receipt, observations, store_artifact=True)
            elif choice < 0.5:
                pages = [
                    ("page", f"https://example.org/{n}/{i}/{j}", rng.randbytes(600))
                    for j in range(2)
                ]
                run.activity(stage, "research", {"query": f"q{i}", "claims": []}, pages)
            else:
                shots = [
                    ("snapshot", f"snap/{n}/{i}", rng.randbytes(900)),
                    ("action_receipt", f"act/{n}/{i}", rng.randbytes(120)),
                ]
                run.activity(stage, "browser", {"flow_id": f"f{i}", "steps": []}, shots)
        run.record("run_finished", status="ok")
        run.close()


# ---- (b) the baseline: bernstein's semantics, straightforwardly ---------------------

ENVELOPE = {"ts", "elapsed_s", "index", "prev_hash", "payload_hash", "event_hash"}


def _canon(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), default=str).encode()


def _acanon(value: Any) -> bytes:
    text = json.dumps(value, ensure_ascii=False, separators=(",", ":"), sort_keys=True, default=str)
    return text.encode()


def _ch(data: bytes) -> str:
    return "sha256:" + hashlib.sha256(data).hexdigest()


def _load_events(path: Path) -> tuple[list[dict[str, Any]], list[int]]:
    rows, discarded = [], []
    with path.open(encoding="utf-8", errors="surrogateescape") as handle:
        for number, line in enumerate(handle):
            line = line.strip()
            if not line:
                continue
            try:
                line.encode("utf-8")
                row = json.loads(line)
            except ValueError:
                discarded.append(number)
                continue
            if isinstance(row, dict):
                rows.append(row)
            else:
                discarded.append(number)
    return rows, discarded


def _chain_ok(rows: list[dict[str, Any]]) -> bool:
    prev = ""
    for index, row in enumerate(rows):
        event_type = str(row.get("event", ""))
        payload = {k: v for k, v in row.items() if k not in ENVELOPE}
        payload["event"] = event_type
        payload_hash = hashlib.sha256(_canon(payload)).hexdigest()
        preimage = {
            "prev_hash": prev,
            "event_type": event_type,
            "payload_hash": payload_hash,
            "index": index,
        }
        expected = hashlib.sha256(_canon(preimage)).hexdigest()
        if str(row.get("prev_hash", "")) != prev or str(row.get("event_hash", "")) != expected:
            return False
        prev = str(row.get("event_hash", ""))
    return True


def _read_cas(cas: Path, digest: str) -> bytes | None:
    try:
        return (cas / (digest.split(":", 1)[1] if ":" in digest else digest)).read_bytes()
    except OSError:
        return None


def _receipt_ok(receipt: dict[str, Any], cas: Path) -> bool:
    from nacl.exceptions import BadSignatureError
    from nacl.signing import VerifyKey

    inputs, outputs = receipt.get("inputs", []), receipt.get("outputs", [])
    plan = receipt.get("plan", {})
    hashes = sorted({str(a["content_hash"]) for a in inputs})
    projection = {"input_hashes": hashes, "steps": [str(s) for s in plan.get("steps", [])]}
    if _ch(_acanon(projection)) != plan.get("plan_hash"):
        return False
    pem_lines = str(receipt["signer_public_key_pem"]).strip().splitlines()
    der = base64.b64decode("".join(pem_lines[1:-1]))
    key = VerifyKey(der[12:])
    for artifact in inputs + outputs:
        message = _acanon({k: str(artifact[k]) for k in ("role", "ref", "content_hash")})
        signature = str(artifact["signature"])
        try:
            key.verify(message, base64.urlsafe_b64decode(signature + "=" * (-len(signature) % 4)))
        except (BadSignatureError, binascii.Error, ValueError):
            return False
    for artifact in inputs + outputs:
        data = _read_cas(cas, str(artifact["content_hash"]))
        if data is None or _ch(data) != artifact["content_hash"]:
            return False
    return True


def baseline_verify_run(workdir: Path, run_id: str) -> int:
    path = workdir / ".sdd" / "runs" / run_id / "journal.jsonl"
    if not path.is_file():
        return 1
    rows, discarded = _load_events(path)
    chain_ok = _chain_ok(rows) and not discarded
    activities = [r for r in rows if r.get("event") == "activity.result"]
    if not activities:
        return 1
    cas = workdir / ".sdd" / "cas"
    store = cas.is_dir()
    ok = chain_ok
    for row in activities:
        listed = row.get("observations")
        observations: list[Any] = listed if isinstance(listed, list) else []
        hashes = sorted({str(o.get("content_hash", "")) for o in observations})
        if _ch(_acanon(hashes)) != str(row.get("evidence_set_hash", "")) or not chain_ok:
            ok = False
            continue
        if store:
            for o in observations:
                data = _read_cas(cas, str(o.get("content_hash", "")))
                if data is None or _ch(data) != str(o.get("content_hash", "")):
                    ok = False
            if row.get("kind") in ("data", "ops"):
                blob = _read_cas(cas, str(row.get("artifact_hash", "")))
                if blob is not None and (
                    _ch(blob) != row["artifact_hash"] or not _receipt_ok(json.loads(blob), cas)
                ):
                    ok = False
    return 0 if ok else 2


# ---- the run ----------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--rows", type=int, default=100)
    parser.add_argument("--jobs", type=int, default=0)
    parser.add_argument(
        "--repeat", type=int, default=3, help="samples of each verify, alternated (best kept)"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bernstein-bench-") as tmp:
        workdir = Path(tmp) / "workdir"
        started = time.perf_counter()
        generate(workdir, args.runs, args.rows)
        generated = time.perf_counter() - started
        key_file = Path(tmp) / "audit.key"
        key_file.write_bytes(AUDIT_MASTER)
        key_file.chmod(0o600)
        run_ids = sorted(os.listdir(workdir / ".sdd" / "runs"))

        with Ledger.open(Path(tmp) / "ledger.db") as ledger:
            started = time.perf_counter()
            summary = import_workdir(ledger, workdir)
            import_s = time.perf_counter() - started

            options = VerifyOptions(jobs=args.jobs, compat="bernstein")
            signer = "ed25519:" + _signer_hex()
            strict = VerifyOptions(jobs=args.jobs, audit_key_file=key_file, trust=(signer,))
            # The three alternate, and each keeps its best sample: on a shared machine a
            # neighbour's burst then slows one sample, not one side of the comparison.
            baseline_samples: list[tuple[float, float]] = []
            compat_samples: list[tuple[float, float]] = []
            strict_samples: list[float] = []
            for _ in range(args.repeat):
                started, cpu = time.perf_counter(), time.process_time()
                baseline = {run_id: baseline_verify_run(workdir, run_id) for run_id in run_ids}
                baseline_samples.append((time.perf_counter() - started, time.process_time() - cpu))

                started, cpu = time.perf_counter(), time.process_time()
                report = ledger.verify(run_ids, options=options)
                compat_samples.append((time.perf_counter() - started, time.process_time() - cpu))
                ours = {verdict.run_id: int(verdict.code) for verdict in report.runs}

                started = time.perf_counter()
                strict_report = ledger.verify(run_ids, options=strict)
                strict_samples.append(time.perf_counter() - started)
            baseline_s, baseline_cpu = min(baseline_samples)
            compat_s, compat_cpu = min(compat_samples)
            strict_s = min(strict_samples)

    disagreements = [r for r in run_ids if baseline[r] != ours[r]]
    rows = args.runs * args.rows
    result = {
        "runs": args.runs,
        "rows": rows,
        "files_imported": summary.files_added,
        "generate_s": round(generated, 3),
        "import_s": round(import_s, 3),
        "import_rows_per_s": round(rows / import_s),
        "baseline_verify_s": round(baseline_s, 3),
        "compat_verify_s": round(compat_s, 3),
        "strict_verify_s": round(strict_s, 3),
        "compat_speedup": round(baseline_s / compat_s, 1),
        "baseline_cpu_s": round(baseline_cpu, 3),
        "compat_cpu_s": round(compat_cpu, 3),
        "compat_cpu_ratio": round(baseline_cpu / compat_cpu, 1),
        "load_average": os.getloadavg()[0],
        "strict_speedup": round(baseline_s / strict_s, 1),
        "baseline_samples_s": [round(wall, 3) for wall, _ in baseline_samples],
        "compat_samples_s": [round(wall, 3) for wall, _ in compat_samples],
        "verdicts_agree": not disagreements,
        "strict_code": int(strict_report.code),
    }
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(
            f"{args.runs:,} runs x {args.rows} rows ({rows:,} rows, {summary.files_added:,} files)"
        )
        print(f"  import                {import_s:8.3f} s  ({rows / import_s:,.0f} rows/s)")
        print(f"  baseline (Python)     {baseline_s:8.3f} s")
        print(f"  verify --compat       {compat_s:8.3f} s  -> {baseline_s / compat_s:5.1f}x faster")
        print(
            f"  CPU time: baseline {baseline_cpu:.3f} s, compat {compat_cpu:.3f} s "
            f"(all threads) -> {baseline_cpu / compat_cpu:.1f}x less work; "
            f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs"
        )
        print(f"  verify (strict)       {strict_s:8.3f} s  -> {baseline_s / strict_s:5.1f}x faster")
        print(
            f"  verdicts agree on every run: {not disagreements}; strict exit {strict_report.code}"
        )
    if disagreements:
        sys.exit(f"verdicts differ for {len(disagreements)} run(s), e.g. {disagreements[:3]}")


def _signer_hex() -> str:
    from nacl.signing import SigningKey

    return bytes(SigningKey(SIGNING_SEED).verify_key).hex()


if __name__ == "__main__":
    main()
