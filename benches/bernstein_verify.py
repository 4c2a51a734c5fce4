"""bernstein runs: what users run, side by side with bernstein 3.23.0's own verifier.

    .venv/bin/python benches/bernstein_verify.py [--profile light|heavy] [--runs N] [--rows M]
                                                 [--repeat R] [--jobs J] [--seed S]
                                                 [--cache DIR] [--keep DIR]
                                                 [--timeout SECONDS] [--json]

``--profile`` picks the workdir's shape: ``heavy`` (the default) is 2,000 runs x 100 rows
(about 33 activity rows and 165 blobs a run); ``light`` is 2,000 runs x 24 rows (about 8
activity rows and 39 blobs a run). ``--runs`` and ``--rows`` override either.

1. bernstein 3.23.0's wheel comes from PyPI (``pip download``) into the cache, once, and
   is imported on this Python through a small shim (``bernstein_peer.py``).
2. A workdir of N runs x M rows (default 2,000 x 100) is written by bernstein's own writers,
   seeded and on a fake clock, with every run shape of the fixture
   ``../shared/fixtures/bernstein-3.23.0-shapes``; it is cached, keyed by N, M and the seed.
   bernstein's ``verify_run_activities`` must accept it (exit 0 for every run with
   activities, 1 for the plain-only runs) or the bench reports nothing.
3. ``agentledger import bernstein`` copies it into a fresh ledger (timed once, not compared).
4. One extra ``--json`` run of each of ours: the compat verdict must equal bernstein's for
   every run, and strict must be clean. A disagreement is printed and the bench exits 2
   (after the timings, unless ours crashed or hung: then nothing is timed).
5. Seven whole processes, alternated, R times each (medians are reported):
   - peer: a fresh interpreter running bernstein's ``verify_run_activities`` over every run
     (``bernstein_peer.py verify``: start-up, imports and the verify loop);
   - ``agentledger verify --compat bernstein`` (bernstein's verdicts, from the ledger);
   - ``agentledger verify --audit-key KEY --trust ed25519:...`` (strict, the signers of
     the receipts trusted);
   - both again with ``--recheck-signatures``: every signature verified in full, as in
     the first verify of a ledger (the others take the signatures this install accepted
     in an earlier verify from its memo, ``signature_memo.py``: a re-verify);
   - peer-audit: bernstein's ``audit verify`` pillars over the sealed audit folder
     (``bernstein_peer.py audit``), and ``agentledger bernstein audit-verify --audit-key``
     (its exit code must be bernstein's).
   What strict adds for the seal and the checkpoints is also timed inside this process
   (``read_folder`` and ``sealed_history`` on the imported ledger, median of R): its
   share of the compat verify's wall time has a 5% budget.
   Each process's peak RSS and CPU time (user plus system, every thread) come from
   ``wait4``; a process still running after ``--timeout`` seconds is killed and counted as
   a failure. From the CPU time the table also gives the most each ratio could be on this
   machine's cores were every core busy from the process's start to its exit: how much
   of a ratio's distance to its target is idle cores, and how much is work.

Without the wheel (no network), the workdir is written by ``agentledger.bernstein.writer``
and the peer is agentledger's Python reference verifier; the output says so.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import bernstein_peer as peer_code
import installed

PEER_SCRIPT = Path(peer_code.__file__).resolve()
TARGETS = {"compat": 15.0, "strict": 12.0}
RECHECK = ["--recheck-signatures"]
"""A first verify's work: no signature taken from the memo of an earlier one."""
PROFILES = {"heavy": (2000, 100), "light": (2000, 24)}
"""Workdir shapes: (runs, rows per run)."""
SEALED_CHECKS_BUDGET = 0.05
"""Strict's seal and checkpoint checks: at most this share of compat verify's wall time."""
COUNTERS = ("runs", "entries", "blobs_checked", "receipts_checked", "audit_records")


@dataclass
class Sample:
    """One whole process: wall time, peak resident set, exit code, what it printed."""

    wall_s: float
    peak_rss_mb: float
    cpu_s: float
    """User plus system time of the process, every thread."""
    code: int
    stdout: str
    stderr: str
    timed_out: bool

    def failure(self, name: str) -> str:
        if self.timed_out:
            return f"{name}: still running after the timeout, killed"
        return f"{name}: exit {self.code}; stderr ends: {self.stderr.strip()[-400:]!r}"


def run_process(command: list[str], scratch: Path, name: str, timeout: float) -> Sample:
    """Run ``command`` to completion; its output goes to files, its rusage through wait4."""
    out_path, err_path = scratch / f"{name}.out", scratch / f"{name}.err"
    with out_path.open("wb") as out, err_path.open("wb") as err:
        started = time.perf_counter()
        process = subprocess.Popen(command, stdout=out, stderr=err)
        killer = threading.Timer(timeout, process.kill)
        killer.start()
        _, status, usage = os.wait4(process.pid, 0)
        wall = time.perf_counter() - started
        killer.cancel()
    process.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return Sample(
        wall_s=wall,
        peak_rss_mb=usage.ru_maxrss / 1024,  # kilobytes on Linux
        cpu_s=usage.ru_utime + usage.ru_stime,
        code=process.returncode,
        stdout=out_path.read_text(errors="replace"),
        stderr=err_path.read_text(errors="replace"),
        timed_out=wall >= timeout,
    )


def peer_report(sample: Sample) -> dict[str, Any]:
    for line in sample.stdout.splitlines():
        if line.startswith("PEER "):
            report: dict[str, Any] = json.loads(line[5:])
            return report
    sys.exit("the peer printed no verdicts: " + sample.failure("peer"))


def json_report(sample: Sample) -> dict[str, Any] | None:
    try:
        report: dict[str, Any] = json.loads(sample.stdout)
    except ValueError:
        return None
    return report


def aggregate(codes: dict[str, int]) -> int:
    values = set(codes.values())
    return 2 if 2 in values else 1 if 1 in values else 0


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--profile", choices=sorted(PROFILES), default="heavy", help="the workdir's shape"
    )
    parser.add_argument("--runs", type=int, default=None, help="runs (default: the profile's)")
    parser.add_argument(
        "--rows", type=int, default=None, help="rows per run (default: the profile's)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="timed samples of each process")
    parser.add_argument("--jobs", type=int, default=None, help="passed to agentledger verify")
    parser.add_argument("--seed", type=int, default=peer_code.DEFAULT_SEED)
    parser.add_argument(
        "--cache",
        type=Path,
        default=peer_code.DEFAULT_CACHE,
        help="the wheel and the generated workdirs (default %(default)s)",
    )
    parser.add_argument(
        "--keep", type=Path, help="keep the ledger and the processes' output in this folder"
    )
    parser.add_argument(
        "--timeout", type=float, default=1800.0, help="seconds before a process is killed"
    )
    parser.add_argument("--json", action="store_true", help="print every figure as JSON")
    args = parser.parse_args()
    runs, rows = PROFILES[args.profile]
    args.runs = runs if args.runs is None else args.runs
    args.rows = rows if args.rows is None else args.rows
    return args


@dataclass
class Workdir:
    path: Path
    manifest: dict[str, Any]
    generated_now: bool
    reference: bool  # the peer is agentledger's reference verifier, not bernstein
    notes: list[str]


def prepare_workdir(args: argparse.Namespace, python: str) -> Workdir:
    """bernstein's wheel and a workdir written by its writers, or the labelled fallbacks."""
    notes: list[str] = []

    def warn(note: str) -> None:
        notes.append(note)
        print("WARNING: " + note, file=sys.stderr)

    installed.compile_package()
    try:
        peer = peer_code.fetch_peer(args.cache, python)
        for tree in (peer.code, peer.deps, peer.cbor):
            installed.compile_tree(tree)  # both sides run as installed wheels do
        writer, reference = "wheel", False
    except peer_code.PeerUnavailable as exc:
        writer, reference = "agentledger", True
        warn(
            f"bernstein {peer_code.BERNSTEIN_VERSION}'s wheel could not be had ({exc}): the "
            "peer below is agentledger's Python reference verifier, NOT bernstein"
        )
    try:
        path, manifest, generated = peer_code.ensure_workdir(
            args.cache, args.runs, args.rows, args.seed, writer, python
        )
    except subprocess.CalledProcessError:
        if writer != "wheel":
            raise
        warn("driving bernstein's writers failed: agentledger's writer wrote the workdir")
        path, manifest, generated = peer_code.ensure_workdir(
            args.cache, args.runs, args.rows, args.seed, "agentledger", python
        )
    return Workdir(path, manifest, generated, reference, notes + manifest["notes"])


def main() -> None:
    args = parse_args()
    python = sys.executable
    agentledger = Path(python).with_name("agentledger")
    if not agentledger.exists():
        sys.exit(f"{agentledger} is missing: run `make setup` first")
    progress = print if sys.stderr.isatty() and not args.json else _quiet
    if not args.json:
        print(
            f"workdir: {args.runs:,} runs x {args.rows} rows, seed {args.seed} (cached once made)"
        )
    workdir = prepare_workdir(args, python)
    manifest = workdir.manifest
    expected = {r: 1 if s == "plain" else 0 for r, s in manifest["run_shapes"].items()}

    with tempfile.TemporaryDirectory(prefix="bernstein-bench-") as tmp:
        scratch = Path(tmp)
        if args.keep is not None:
            shutil.rmtree(args.keep, ignore_errors=True)
            args.keep.mkdir(parents=True)
            scratch = args.keep

        def run(command: list[str], name: str) -> Sample:
            return run_process(command, scratch, name, args.timeout)

        key_file = scratch / "audit.key"
        key_file.write_bytes((workdir.path / "audit.key").read_bytes())
        key_file.chmod(0o600)
        base = [str(agentledger), "--home", str(scratch / "home")]
        base += ["--ledger", str(scratch / "ledger.db")]
        jobs = [] if args.jobs is None else ["--jobs", str(args.jobs)]
        trust = [arg for key in manifest["trust"] for arg in ("--trust", key)]
        peer = [python, str(PEER_SCRIPT), "verify", str(workdir.path), "--cache", str(args.cache)]
        peer_audit = [
            python,
            str(PEER_SCRIPT),
            "audit",
            str(workdir.path),
            "--cache",
            str(args.cache),
        ]
        commands = {
            "peer": peer + (["--reference"] if workdir.reference else []),
            "compat": [*base, "verify", "--compat", "bernstein", *jobs],
            "strict": [*base, "verify", "--audit-key", str(key_file), *trust, *jobs],
            "compat-first": [*base, "verify", "--compat", "bernstein", *RECHECK, *jobs],
            "strict-first": [
                *base,
                "verify",
                "--audit-key",
                str(key_file),
                *trust,
                *RECHECK,
                *jobs,
            ],
            "peer-audit": [*peer_audit],
            "audit": [*base, "bernstein", "audit-verify", "--audit-key", str(key_file)],
        }
        if workdir.reference:
            del commands["peer-audit"]  # no wheel: no bernstein to ask

        # bernstein must accept its own workdir (untimed; also warms the page cache).
        check = peer_report(run(commands["peer"], "peer-check"))
        peer_codes: dict[str, int] = check["codes"]
        rejected = {r: c for r, c in peer_codes.items() if c != expected.get(r)}
        if rejected or set(peer_codes) != set(expected):
            sample = dict(list(rejected.items())[:5])
            sys.exit(
                f"REFUSED: {check['verifier']} does not accept the generated workdir as expected "
                f"({len(rejected)} run(s) differ, e.g. {sample}); no figures reported"
            )

        imported = run([*base, "import", "bernstein", str(workdir.path)], "import")
        if imported.code != 0:
            sys.exit("import failed: " + imported.failure("import"))

        # Verdicts, from one extra --json run of each of ours.
        disagreements: list[str] = []
        compat_sample = run([*commands["compat"], "--json"], "compat-json")
        strict_sample = run([*commands["strict"], "--json"], "strict-json")
        compat, strict = json_report(compat_sample), json_report(strict_sample)
        if compat is None or strict is None:
            for sample, name in ((compat_sample, "compat"), (strict_sample, "strict")):
                if json_report(sample) is None:
                    print("MISMATCH: no verdicts from " + sample.failure(name), file=sys.stderr)
            sys.exit(2)
        ours = {r["run"]: r["code"] for r in compat["results"]}
        for run_id, code in sorted(peer_codes.items()):
            if ours.get(run_id) != code:
                disagreements.append(f"{run_id}: bernstein exits {code}, ours {ours.get(run_id)}")
        if strict_sample.code != 0:
            disagreements.append(
                f"strict: exit {strict_sample.code} on untampered data, "
                f"findings {strict.get('findings_by_check')}"
            )
        expected_code = {"peer": aggregate(peer_codes), "compat": aggregate(peer_codes)}
        expected_code["strict"] = 0
        expected_code["compat-first"] = expected_code["compat"]
        expected_code["strict-first"] = 0
        expected_code["audit"] = 0 if manifest.get("sealed") else 1  # no seal: Merkle fails
        if "peer-audit" in commands:
            audit_check = run(commands["peer-audit"], "peer-audit-check")
            theirs = json.loads(audit_check.stdout.partition("AUDIT ")[2] or "{}")
            expected_code["peer-audit"] = 0
            expected_code["audit"] = int(theirs.get("code", -1))
            if theirs.get("code") != 0:
                disagreements.append(f"bernstein's audit verify on its own workdir: {theirs}")

        # The timed processes, alternated: each round starts one further along.
        samples: dict[str, list[Sample]] = {name: [] for name in commands}
        names = list(commands)
        for round_ in range(args.repeat):
            turn = round_ % len(names)
            for name in names[turn:] + names[:turn]:
                progress(
                    f"  round {round_ + 1}/{args.repeat}: {name:<8}", end="\r", file=sys.stderr
                )
                sample = run(commands[name], f"{name}-{round_}")
                samples[name].append(sample)
                if sample.code != expected_code[name] or sample.timed_out:
                    disagreements.append(
                        sample.failure(name) + f" (expected exit {expected_code[name]})"
                    )
        progress(" " * 40, end="\r", file=sys.stderr)
        # In this process, after the timed ones: a child's peak RSS counts its parent's
        # resident set at the fork, which this would inflate.
        sealed_s = time_sealed_checks(scratch / "ledger.db", key_file, args.repeat)

    result = figures(args, workdir, check, imported, samples, strict, disagreements)
    result["sealed_checks_s"] = round(sealed_s, 4)
    result["sealed_checks_share"] = round(sealed_s / result["compat_s"], 4)
    result["sealed_checks_budget"] = SEALED_CHECKS_BUDGET
    if args.json:
        print(json.dumps(result, indent=2, ensure_ascii=False))
    else:
        print_table(result)
    if disagreements:
        print(f"\nMISMATCH ({len(disagreements)}):", file=sys.stderr)
        for line in disagreements[:20]:
            print("  " + line, file=sys.stderr)
        sys.exit(2)


def time_sealed_checks(ledger_path: Path, key_file: Path, repeat: int) -> float:
    """Median seconds of what strict verify adds for the seal, checkpoints, anchors and
    co-signatures: reading them from the ledger and checking them. The day files and
    their HMAC walk are strict's anyway (the chain's own check): they are read and
    walked before the clock starts, and handed over as strict hands them over."""
    from agentledger import Ledger
    from agentledger.bernstein.audit_chain import read_master_key, verify_audit
    from agentledger.bernstein.audit_verdict import read_folder
    from agentledger.bernstein.sealed_history import sealed_history
    from agentledger.bernstein.workdir import LedgerWorkdir

    master = read_master_key(key_file.read_bytes())
    times = []
    with Ledger.open(ledger_path) as ledger, ledger.db.snapshot() as conn:
        workdir = LedgerWorkdir(conn, ledger.blobs)
        segments = workdir.audit_segments()
        chain = verify_audit(segments, master)
        for _ in range(max(repeat, 1)):
            started = time.perf_counter()
            folder = read_folder(workdir, segments, chain)
            history = sealed_history(workdir, folder, master, frozenset())
            times.append(time.perf_counter() - started)
            if history.findings:
                sys.exit(f"strict's seal checks find damage in an untampered workdir: {history}")
    return statistics.median(times)


def figures(
    args: argparse.Namespace,
    workdir: Workdir,
    check: dict[str, Any],
    imported: Sample,
    samples: dict[str, list[Sample]],
    strict: dict[str, Any],
    disagreements: list[str],
) -> dict[str, Any]:
    manifest = workdir.manifest
    wall = {name: statistics.median(s.wall_s for s in runs) for name, runs in samples.items()}
    cpu = {name: statistics.median(s.cpu_s for s in runs) for name, runs in samples.items()}
    in_process = [peer_report(s) for s in samples["peer"]]
    codes: dict[str, int] = {}
    for code in check["codes"].values():
        codes[str(code)] = codes.get(str(code), 0) + 1
    copied = ("runs", "rows", "activity_rows", "shapes", "stages", "terminal_states", "blobs")
    return {
        "profile": args.profile,
        "peer": check["verifier"],
        "reference": workdir.reference,
        "workdir": str(workdir.path),
        "workdir_generated_now": workdir.generated_now,
        "writer": manifest["writer"],
        "notes": workdir.notes,
        **{key: manifest[key] for key in copied},
        "refused_redundant": manifest["refused_redundant"],
        "audit_records": manifest["audit_records"],
        "audit_files": manifest["audit_files"],
        "generate_s": manifest["generate_s"],
        "peer_codes": dict(sorted(codes.items())),
        "import_s": round(imported.wall_s, 3),
        "import_peak_rss_mb": round(imported.peak_rss_mb, 1),
        "repeat": args.repeat,
        "jobs": args.jobs,
        "peer_s": round(wall["peer"], 3),
        "peer_in_process_import_s": statistics.median(r["import_s"] for r in in_process),
        "peer_in_process_verify_s": statistics.median(r["verify_s"] for r in in_process),
        "compat_s": round(wall["compat"], 3),
        "strict_s": round(wall["strict"], 3),
        "compat_first_s": round(wall["compat-first"], 3),
        "strict_first_s": round(wall["strict-first"], 3),
        "peer_audit_s": round(wall["peer-audit"], 3) if "peer-audit" in wall else None,
        "audit_s": round(wall["audit"], 3),
        "peer_over_compat": round(wall["peer"] / wall["compat"], 1),
        "peer_over_strict": round(wall["peer"] / wall["strict"], 1),
        "peer_over_compat_first": round(wall["peer"] / wall["compat-first"], 1),
        "peer_over_strict_first": round(wall["peer"] / wall["strict-first"], 1),
        "targets": TARGETS,
        "peak_rss_mb": {n: round(max(s.peak_rss_mb for s in r), 1) for n, r in samples.items()},
        "cpu_s": {n: round(c, 3) for n, c in cpu.items()},
        # What the CPU time allows: no wall time below cpu / cores, so no ratio above this.
        "peer_over_cpu_bound": {
            key: round(wall["peer"] / (cpu[key] / len(os.sched_getaffinity(0))), 1)
            for key in ("compat", "strict", "compat-first", "strict-first")
        },
        "samples_s": {n: [round(s.wall_s, 3) for s in r] for n, r in samples.items()},
        "exit_codes": {n: sorted({s.code for s in r}) for n, r in samples.items()},
        "strict_counters": {key: strict.get(key) for key in COUNTERS},
        "verdicts_agree": not disagreements,
        "disagreements": disagreements[:20],
        "load_average": os.getloadavg()[0],
        "cpus": os.cpu_count(),
        "cores": len(os.sched_getaffinity(0)),
    }


def _quiet(*_: Any, **__: Any) -> None:
    pass


def print_table(r: dict[str, Any]) -> None:
    share = r["activity_rows"] / r["rows"]
    print(f"  profile {r['profile']}")
    print(
        f"  {r['runs']:,} runs, {r['rows']:,} rows ({r['activity_rows']:,} activity.result, "
        f"{share:.0%}), {r['blobs']:,} blobs, {r['audit_records']:,} audit records in "
        f"{r['audit_files']} day file(s)"
    )
    how = f"generated in {r['generate_s']} s" if r["workdir_generated_now"] else "cached"
    print(f"  written by {r['writer']}; {how}: {r['workdir']}")
    print("  shapes: " + ", ".join(f"{k} {v}" for k, v in r["shapes"].items()))
    print("  stages: " + ", ".join(f"{k} {v}" for k, v in r["stages"].items()))
    print("  states: " + ", ".join(f"{k} {v}" for k, v in r["terminal_states"].items()))
    codes = ", ".join(f"exit {c}: {n:,} runs" for c, n in r["peer_codes"].items())
    print(f"  {r['peer']} accepts it: {codes}")
    print(
        f"import into the ledger (once, not compared): {r['import_s']:.2f} s "
        f"({r['rows'] / r['import_s']:,.0f} rows/s), peak RSS {r['import_peak_rss_mb']:.0f} MB"
    )
    rows = [
        ("peer", r["peer"]),
        ("compat", "agentledger verify --compat bernstein"),
        ("strict", "agentledger verify --audit-key --trust (strict)"),
        ("compat_first", "  the same, first verify (--recheck-signatures)"),
        ("strict_first", "  strict, first verify (--recheck-signatures)"),
        ("peer_audit", "bernstein audit verify (its audit-folder pillars)"),
        ("audit", "agentledger bernstein audit-verify --audit-key"),
    ]
    rows = [(key, label) for key, label in rows if r[key + "_s"] is not None]
    width = max(len(label) for _, label in rows)
    title = f"whole processes, median of {r['repeat']}, alternated"
    print(f"\n{title:<{width + 2}}   wall s   CPU s  peak RSS MB")
    for key, label in rows:
        name = key.replace("_", "-")
        rss, cpu = r["peak_rss_mb"][name], r["cpu_s"][name]
        print(f"  {label:<{width}} {r[key + '_s']:8.2f} {cpu:7.2f}  {rss:11.0f}")
    print(
        f"  (the peer inside its process: imports {r['peer_in_process_import_s']:.2f} s, "
        f"verify loop {r['peer_in_process_verify_s']:.2f} s)"
    )
    peer = "reference" if r["reference"] else "bernstein"
    for key in ("compat", "strict", "compat_first", "strict_first"):
        ratio, target = r[f"peer_over_{key}"], r["targets"][key.removesuffix("_first")]
        verdict = "met" if ratio >= target else "NOT met"
        print(f"  {peer} / {key:<12} {ratio:6.1f}x   (target >= {target:.0f}x: {verdict})")
    bound = ", ".join(f"{key} {ratio:.1f}x" for key, ratio in r["peer_over_cpu_bound"].items())
    print(
        f"  the most the CPU time allows on {r['cores']} cores (every core busy from start to "
        f"exit): {bound}"
    )
    share, budget = r["sealed_checks_share"], r["sealed_checks_budget"]
    verdict = "met" if share <= budget else "NOT met"
    print(
        f"  strict's seal/checkpoint checks in process: {r['sealed_checks_s']:.4f} s, "
        f"{share:.2%} of compat (budget <= {budget:.0%}: {verdict})"
    )
    if r["verdicts_agree"]:
        print("verdicts: compat agrees with the peer on every run; strict is clean (exit 0)")
    else:
        print(f"verdicts: MISMATCH ({len(r['disagreements'])} listed on stderr)")
    print(f"strict counters: {r['strict_counters']}")
    for note in r["notes"]:
        print(f"note: {note}")
    print(f"load average {r['load_average']:.1f} on {r['cpus']} CPUs")


if __name__ == "__main__":
    main()
