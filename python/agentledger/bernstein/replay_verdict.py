"""What ``bernstein replay RUN --verify`` says of a run's journal (docs/BERNSTEIN.md §18).

The journal is walked (§2). A chain that breaks, or a line the reader discards, fails
(exit 1, the divergent step named). An intact chain is then held to the head the run's
lineage spine sealed — the last spine entry whose ``step_id`` is
``replay-journal-head:<head>`` — but only when that seal can be trusted: the spine
exists, the audit key is given, and the spine passes bernstein's own verify
(``lineage.spine_problems``). Another head is an identity mismatch (exit 1); the same
head is ``verified``, no trustworthy seal ``unverifiable`` (both exit 0). Journals
holding provider-state rows (bernstein fails some of them closed) are not redone here,
nor are spines under the ``jcs-v2`` profile, whose tags this does not check.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from agentledger import _core
from agentledger.bernstein.lineage import LEGACY_PROFILE, SEAL_STEP, spine_problems, spine_profile
from agentledger.limits import MAX_DOCUMENT_BYTES

PROVIDER_STATE_ROWS = b'"provider_state_'
"""The prefix of the events (mutation, capture failed) bernstein's replay judges apart."""


@dataclass
class ReplayVerdict:
    """``status``: ``missing``, ``diverged``, ``mismatched``, ``verified``,
    ``unverifiable`` or ``not_reproduced``."""

    status: str
    errors: list[str] = field(default_factory=list)
    head: str | None = None
    sealed_head: str | None = None

    @property
    def code(self) -> int | None:
        if self.status == "not_reproduced":
            return None
        return 0 if self.status in {"verified", "unverifiable"} else 1


def sealed_head(spine: bytes | None, head_file: bytes | None, master: bytes | None) -> str | None:
    """The head the spine seals, when the seal can be trusted; None otherwise."""
    if spine is None or master is None or len(spine) > MAX_DOCUMENT_BYTES:
        return None
    if spine_problems(spine, head_file, master):
        return None
    head = ""
    for line in spine.split(b"\n"):
        if SEAL_STEP.encode() not in line:
            continue
        row = json.loads(line)  # the spine verified: every line is an entry
        step = str(row.get("step_id", ""))
        if step.startswith(SEAL_STEP):
            head = step[len(SEAL_STEP) :]
    return head or None


def replay_verdict(
    journal: bytes | None,
    spine: bytes | None,
    head_file: bytes | None,
    master: bytes | None,
) -> ReplayVerdict:
    """The journal's bytes (None: no journal), the run's spine and ``spine.head``, and
    the audit master key (``--audit-key``)."""
    if journal is None:
        return ReplayVerdict("missing", ["no journal for this run"])
    report = _core.bernstein_verify_journals([journal])[0]
    if report["crash"]:
        return ReplayVerdict("diverged", [f"bernstein's walk raises: {report['crash']}"])
    head = str(report["head"])
    if not report["chain_consistent"] or report["discarded_lines"]:
        why = report["error"] or f"discarded line(s) {report['discarded_lines']}"
        return ReplayVerdict("diverged", [f"step {report['divergent_index']}: {why}"], head)
    if PROVIDER_STATE_ROWS in journal:
        return ReplayVerdict("not_reproduced", ["provider-state rows are not redone here"], head)
    profile = spine_profile(head_file)
    if spine is not None and master is not None and profile != LEGACY_PROFILE:
        return ReplayVerdict("not_reproduced", [f"a {profile} spine is not redone here"], head)
    sealed = sealed_head(spine, head_file, master)
    if sealed is None:
        return ReplayVerdict("unverifiable", ["no trustworthy journal seal"], head)
    if sealed != head:
        return ReplayVerdict(
            "mismatched", [f"sealed head {sealed}, journal head {head}"], head, sealed
        )
    return ReplayVerdict("verified", [], head, sealed)
