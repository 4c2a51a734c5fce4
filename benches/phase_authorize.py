"""Authorization decisions: cost per decision early and late in a run, beside plain appends.

    python benches/phase_authorize.py [--decisions N] [--json]

Each ``run.authorize`` reads the run's phase state, re-derives the evidence in force and
appends one ``phase.authorize`` entry in its own durable transaction. The baseline is a
durable ``run.append`` of an entry of the same size, measured in the same run. The late
figure (after N decisions) over the early one should stay near 1: decisions are not
replayed into the state, and the run's journal is verified once per process (later
decisions hash only the rows after those verified), so a decision costs the same however
many came before.
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from agentledger import Ledger
from agentledger.phase import DIMENSIONS, builtin_profile

KINDS = {"parent": "parent", "agentProfile": "agent-profile", "sandbox": "sandbox",
         "toolCatalog": "tool-catalog", "launchPolicy": "launch-policy"}  # fmt: skip


def compiler_input(phase: str) -> dict[str, Any]:
    sources = {
        key: {
            "id": f"{kind}:bench",
            "kind": kind,
            "authority": {d: ["*"] for d in DIMENSIONS},
            "enforcement": dict.fromkeys(DIMENSIONS, "enforced"),
        }
        for key, kind in KINDS.items()
    }
    return {"profile": builtin_profile(phase), "sources": sources}


def timed(action: Any, count: int) -> float:
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        action()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--decisions", type=int, default=2000)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder, Ledger.open(Path(folder) / "l.db") as ledger:
        run = ledger.run("bench")
        run.record_phase_evidence(None, compiler_input=compiler_input("implement"))
        digest = run.phase_state().effective["digest"]  # type: ignore[index]

        def decide() -> None:
            run.authorize("command.execute", ["build"], evidence_digest=digest)

        baseline_run = ledger.run("baseline")
        body = next(run.entries(kind="phase.evidence")).body

        def append() -> None:
            baseline_run.append("step", body)

        early = timed(decide, 50)
        for _ in range(args.decisions):
            decide()
        late = timed(decide, 50)
        baseline = timed(append, 50)
    figures = {
        "decision_early_ms": round(early * 1000, 3),
        "decision_late_ms": round(late * 1000, 3),
        "append_baseline_ms": round(baseline * 1000, 3),
        "late_over_early": round(late / early, 2),
        "decision_over_append": round(early / baseline, 2),
        "decisions_between": args.decisions,
    }
    if args.json:
        print(json.dumps(figures, indent=2))
        return
    print(f"authorize, early:          {figures['decision_early_ms']} ms (median of 50)")
    print(f"authorize, after {args.decisions}:  {figures['decision_late_ms']} ms")
    print(f"durable append (baseline): {figures['append_baseline_ms']} ms")
    print(f"late / early:              {figures['late_over_early']}x   (flat is ~1)")
    print(f"decision / append:         {figures['decision_over_append']}x")


if __name__ == "__main__":
    main()
