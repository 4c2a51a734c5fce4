"""One table explains every check: the reports, `explain` and docs/CHECKS.md read it."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from agentledger.checks import CHECKS, RULE, markdown

ROOT = Path(__file__).resolve().parents[2]
FAMILIES = (
    "entry|chain|run|runs|blob|activity|receipt|audit|team|log|checkpoint|archive|phase|bernstein"
    "|schema|prune|gc"
)
CHECK_LITERAL = re.compile(rf'"((?:{FAMILIES})\.[a-z_]+(?:\.[a-z_]+)*)"')
NOT_CHECKS = {
    "activity.result",
    "activity.refused",
    "gc.pruned",
    "team.loaded",
    "audit.key",
    "receipt.plan",
    "chain.tear_acknowledged",
    "chain.torn_record",
}
"""Literals of those shapes that are entry kinds, file names or prefixes, not check ids."""


def test_docs_checks_md_is_the_generated_table() -> None:
    committed = (ROOT / "docs" / "CHECKS.md").read_text(encoding="utf-8")
    assert committed == markdown(), "regenerate: python -m agentledger.checks --markdown"


def test_every_check_the_code_can_report_is_explained() -> None:
    sources = [*(ROOT / "python" / "agentledger").rglob("*.py"), *(ROOT / "rust").rglob("*.rs")]
    found = {
        match.group(1)
        for source in sources
        if "fuzz" not in source.parts
        for match in CHECK_LITERAL.finditer(source.read_text(encoding="utf-8"))
    }
    # bernstein's row findings are named in Rust by field (bernstein.<field>).
    found |= {"bernstein.index", "bernstein.payload_hash", "bernstein.duplicate_key"}
    assert sorted(found - NOT_CHECKS - set(CHECKS)) == []
    for info in CHECKS.values():
        assert info.means.endswith(".") and info.expected and info.actual, info.id


def test_explain_prints_one_check_and_lists_them_all(cli: Any) -> None:
    one = cli("explain", "entry.hash")
    assert one.code == 0
    assert CHECKS["entry.hash"].means in one.out
    assert RULE in one.out
    every = cli("explain")
    assert every.code == 0
    assert all(check in every.out for check in CHECKS)
    listing = cli("explain", "--json").json()
    assert [item["check"] for item in listing["checks"]] == list(CHECKS)
    assert cli("explain", "no.such").code == 1


def test_a_column_edit_is_not_said_to_be_a_change_of_the_bytes(ledger_path: Path, cli: Any) -> None:
    """A kind column edited, or two rows' seq swapped, were said to be "the bytes changed
    after they were written", though the bytes were intact (no entry.hash finding)."""
    import apsw

    from agentledger import Ledger

    with Ledger.open(ledger_path) as ledger:
        ledger.run("r").append_many([("step", {"n": n}) for n in range(3)])
    conn = apsw.Connection(str(ledger_path))
    conn.execute("UPDATE entries SET kind = 'other' WHERE run_id = 'r' AND seq = 1")
    conn.close()
    report = cli("verify", "--json").json()
    said = {d["check"]: d["says"] for f in report["failures"] for d in f["divergences"]}
    assert said == {"entry.kind": "the kind column and the kind in its bytes disagree"}
