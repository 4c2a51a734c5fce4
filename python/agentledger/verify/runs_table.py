"""The ``runs`` table must agree with the journal it summarises."""

from __future__ import annotations

from agentledger.storage import native
from agentledger.verify.context import VerifyContext
from agentledger.verify.results import Divergence


def _hex(digest: bytes | None) -> str:
    return "none" if digest is None else "blake3:" + digest.hex()


def check_heads(ctx: VerifyContext) -> None:
    """Each run's cached head (last seq and hash) matches its last entry.

    Expected is the chain's last entry (anchored), actual the cache the runs table holds.
    """
    for run_id, verdict in list(ctx.verdicts.items()):
        if verdict.code == 1:
            continue
        if run_id not in ctx.heads:
            ctx.diverged(
                run_id, Divergence(run_id, None, "run.unknown", "a row in runs", "missing")
            )
            continue
        head_seq, head_hash = ctx.heads[run_id]
        last_seq, last_hash = ctx.tails.get(run_id, (-1, None))
        if last_seq < 0:
            # Every writer adds a run's row with its first entry: a row alone was added.
            ctx.diverged(
                run_id, Divergence(run_id, None, "run.empty", "at least one entry", "none")
            )
            continue
        if head_seq != last_seq:
            ctx.diverged(
                run_id, Divergence(run_id, None, "run.head_seq", str(last_seq), str(head_seq))
            )
        if head_hash != last_hash:
            ctx.diverged(
                run_id, Divergence(run_id, None, "run.head_hash", _hex(last_hash), _hex(head_hash))
            )


def check_ordinals(ctx: VerifyContext) -> None:
    """Ordinals only order the listing, but they must be exactly 1..N: no value is loose."""
    if not ctx.whole:
        return
    ordinals = [
        row[0] for row in native.rows(ctx.conn, "SELECT ordinal FROM runs ORDER BY ordinal")
    ]
    if ordinals != list(range(1, len(ordinals) + 1)):
        ctx.diverged(
            None,
            Divergence(None, None, "runs.ordinal", f"1..{len(ordinals)}", _holes(ordinals)),
        )


def _holes(ordinals: list[int]) -> str:
    """What is wrong with the listing order, named: each hole (a removed run), each repeat."""
    wrong: list[str] = []
    expected = 1
    for ordinal in ordinals:
        if ordinal > expected:
            hole = str(expected) if ordinal == expected + 1 else f"{expected}..{ordinal - 1}"
            wrong.append(f"{hole} missing (a run removed)")
        elif ordinal < expected:
            wrong.append(f"{ordinal} repeated or out of order")
        expected = max(expected, ordinal + 1)
    shown = ", ".join(wrong[:10]) + (f", and {len(wrong) - 10:,} more" if len(wrong) > 10 else "")
    return f"{len(ordinals):,} runs, ordinals {ordinals[0]}..{ordinals[-1]}: {shown}"
