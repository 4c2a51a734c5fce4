"""Every verification check, explained in plain words: the one table the reports read.

A finding (``Divergence``) names its check by id. This table says, for each id, what the
check means and what its *expected* and *actual* sides are. One rule gives them their
meaning everywhere:

- **expected** is what the anchored record says must be there: the hash chain, a signed
  checkpoint, a recorded hash (an entry's stored hash, a pinned evidence set hash, a blob's
  name, an audit record, a receipt's claim);
- **actual** is what the file holds now (or what its bytes hash to now).

The terminal report, the HTML report, ``agentledger explain`` and the generated
``docs/CHECKS.md`` (``python -m agentledger.checks --markdown``) all read this table; a
test keeps the committed file equal to the generated one.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from itertools import groupby

RULE = (
    "expected is what the anchored record (the hash chain, a signed checkpoint, a recorded "
    "hash) says must be there; actual is what the file holds now."
)


@dataclass(frozen=True, slots=True)
class CheckInfo:
    """One check: its id, what a finding of it means, and what each side holds."""

    id: str
    means: str
    expected: str
    actual: str

    @property
    def family(self) -> str:
        return self.id.split(".", 1)[0]


def _table(*rows: tuple[str, str, str, str]) -> dict[str, CheckInfo]:
    table = {row[0]: CheckInfo(*row) for row in rows}
    assert len(table) == len(rows), "a check id is listed twice"
    return table


# fmt: off
CHECKS: dict[str, CheckInfo] = _table(
    # ---- the journal: every entry, re-hashed and re-chained (Rust) --------------------
    ("entry.hash", "The entry's bytes were changed after it was written: they no longer "
     "hash to the hash recorded for it.",
     "the hash recorded for the entry (the chain points at it)",
     "the hash of the entry's bytes as the file holds them now"),
    ("entry.size", "The entry is longer than an entry can be (16 MiB of canonical bytes, "
     "the most a proof carries): it was not written by agentledger, and it is not parsed.",
     "at most 16 MiB", "the entry's length in bytes"),
    ("entry.json", "The entry's bytes are not a JSON object.",
     "a JSON object", "what the bytes hold (the parse error)"),
    ("entry.canonical", "The entry's bytes are JSON but not in canonical form (RFC 8785), so "
     "they were not written by agentledger.",
     "RFC 8785 canonical bytes", "another encoding"),
    ("entry.v", "The entry's format version is not one this verifier knows.",
     "version 1", "the version field the entry holds"),
    ("entry.run", "The entry names another run than the one it is filed under.",
     "the run the entry is filed under", "the run the entry's bytes name"),
    ("entry.seq", "The entry names another step number than the position it is filed at.",
     "the step the entry is filed at", "the step the entry's bytes name"),
    ("entry.kind", "The entry's kind column and the kind inside its bytes disagree.",
     "the kind column", "the kind the entry's bytes name"),
    ("entry.prev", "The entry has no well-formed link to the entry before it.",
     "a hash", "what the prev field holds"),
    ("entry.ts", "The entry has no timestamp.", "a timestamp", "what the ts field holds"),
    ("entry.body", "The entry has no body.", "a body", "missing"),
    ("chain.gap", "Steps are missing before this one: entries were deleted from the run.",
     "the next step of the chain", "the step the file holds next"),
    ("chain.order", "A step number repeats or goes backwards: entries were moved or copied.",
     "the next step of the chain", "the step the file holds next"),
    ("chain.prev", "The entry does not link to the entry before it: the one before was "
     "changed, removed or replaced.",
     "the link (prev) this entry holds: the hash of the entry before it when it was written",
     "the hash of the entry the file holds before it now"),
    ("activity.evidence_set_hash", "An activity's pinned evidence set hash does not "
     "recompute from the observation hashes it lists: an observation was swapped.",
     "the evidence set hash pinned in the activity result",
     "the hash of the observation hashes the entry holds now"),
    ("activity.role_kind", "A stage's modality is not the one the team manifest declares "
     "for its role.",
     "the modality the pinned team manifest declares for the role",
     "the modality the stage holds"),
    ("activity.role_decision", "A stage's role was not decided by the team in force when it "
     "was logged: the role is not declared, the team was ignored, or the stage pins a "
     "manifest that no team load put in force for that role.",
     "the role as the team loads logged before the stage declare it",
     "the role, modality and manifest the stage holds"),
    ("activity.stage_unique", "A stage reuses the stage id of an earlier result of its run: "
     "the boundary should have refused it (duplicate-stage).",
     "a stage id no earlier result of the run uses",
     "the stage id and the earlier step that holds it"),
    ("activity.redundant", "A stage pins an evidence set an earlier result of its run "
     "already pinned: the boundary should have refused it (redundant-evidence).",
     "an evidence set no earlier result of the run pins",
     "the evidence set and the earlier step that pins it"),
    ("activity.refusal", "A recorded redundant-evidence refusal names no earlier result "
     "pinning that evidence set.",
     "the earlier result the refusal names, pinning its evidence set",
     "the earlier result that pins it in the journal, if any"),
    ("team.manifest", "The team manifest a stage pins is missing or unreadable.",
     "the manifest hash the stage pins", "what the blob store holds for it"),
    # ---- the runs table ---------------------------------------------------------------
    ("run.unknown", "Entries exist for a run the runs table does not list.",
     "a row in the runs table", "missing"),
    ("run.empty", "The runs table lists a run that has no entry: a run exists once it has "
     "one (its row is written with its first entry), so the row was added by hand.",
     "at least one entry of the run", "none"),
    ("run.head_seq", "The run's cached last step disagrees with its chain: entries were "
     "removed from its end, or the cache was edited.",
     "the last step of the run's chain", "the last step the runs table records"),
    ("run.head_hash", "The run's cached head hash disagrees with its chain's last entry.",
     "the hash of the chain's last entry", "the head hash the runs table records"),
    ("runs.ordinal", "The run listing order has holes or repeats: a run was removed or "
     "inserted by hand.",
     "ordinals 1..N", "the ordinals the runs table holds"),
    # ---- the blob store ---------------------------------------------------------------
    ("blob.missing", "Bytes an activity pinned (an observation, an artifact) are not in the "
     "blob store.",
     "the content hash the activity pinned", "absent"),
    ("blob.digest", "A blob's bytes were changed: they no longer hash to its name.",
     "the blob's name (the hash of its bytes when stored)",
     "the hash of the bytes the store holds now"),
    ("blob.size", "A blob's recorded size and its bytes disagree.",
     "the size recorded for the blob", "the number of bytes the store holds"),
    ("blob.chunk_size", "A blob's chunks are not cut at its recorded chunk size.",
     "the recorded chunk size", "the chunk sizes the store holds"),
    ("blob.chunks", "A blob's chunks are not numbered 0..n-1: a chunk was removed or added.",
     "chunks 0..n-1", "the chunk numbers the store holds"),
    ("blob.name", "A blob's name is not a blake3:/sha256: digest.",
     "blake3:<hex> or sha256:<hex>", "the name the store holds"),
    ("blob.orphan_chunks", "Chunks exist for a blob the store does not list.",
     "no chunks without a blob", "chunks"),
    # ---- data/ops receipts ------------------------------------------------------------
    ("receipt.entry", "A data/ops activity result is malformed.",
     "a data/ops result body", "what the entry holds"),
    ("receipt.missing", "A data/ops stage's signed receipt is not in the blob store.",
     "the receipt hash the stage pinned (artifact_hash)", "absent"),
    ("receipt.artifact_hash", "The stored receipt's bytes do not hash to the hash the stage "
     "pinned.",
     "the receipt hash the stage pinned", "the hash of the receipt bytes stored now"),
    ("receipt.json", "The stored receipt is not JSON.", "a JSON receipt", "the parse error"),
    ("receipt.structure", "The receipt lacks a field or holds one of the wrong shape.",
     "the receipt's required shape", "what the receipt holds"),
    ("receipt.binding", "The receipt is bound to another run, stage or modality.",
     "the run, stage and modality of the entry", "what the receipt names"),
    ("receipt.signer", "The receipt's signer key is not an Ed25519 key.",
     "ed25519:<64 hex>", "what the receipt holds"),
    ("receipt.plan_inputs", "The plan's input hashes are not the hashes of the receipt's "
     "signed inputs.",
     "the input hashes the plan records", "the hashes of the signed inputs the receipt holds"),
    ("receipt.plan_hash", "The plan hash does not recompute from the plan's inputs and steps.",
     "the plan hash the receipt records", "the hash of the inputs and steps it holds now"),
    ("receipt.observations", "The receipt's inputs and outputs are not exactly the entry's "
     "observations.",
     "the observation hashes the entry pinned", "the receipt's input/output hashes"),
    ("receipt.untrusted_signer", "The receipt is signed by a key this verification does not "
     "trust (anyone can sign with a key they embed).",
     "a trusted signer (--trust, the install key, the trust file)", "the receipt's signer"),
    ("receipt.signature", "A signature in the receipt does not verify: a signed input, "
     "output or the seal was changed.",
     "a valid Ed25519 signature", "the signature the receipt holds"),
    # ---- the audit mirror -------------------------------------------------------------
    ("audit.gap", "Audit mirror records are missing: positions skip.",
     "the next record position", "the position the file holds next"),
    ("audit.mac", "An audit record's HMAC does not recompute with the audit key: the record "
     "was changed.",
     "the HMAC recorded with the record", "the HMAC of the record as it is now"),
    ("audit.record", "An audit record is malformed, or is filed at another position, run or "
     "step than it names.",
     "what the record names (it is HMAC-protected)", "where the record is filed"),
    ("audit.chain", "An audit record does not link to the record before it.",
     "the HMAC of the record before", "the link this record holds"),
    ("audit.entry", "The audit mirror and the journal disagree about an activity.",
     "what the audit record says the entry is", "what the journal holds"),
    ("audit.missing", "An activity the journal says was mirrored has no audit record.",
     "a mirror record", "none"),
    ("audit.orphan", "An audit record names an activity the journal does not hold: the "
     "entry was removed or replaced.",
     "an activity entry at this step", "none"),
    # ---- the workspace log and its checkpoints ----------------------------------------
    ("log.size", "The workspace log and the entries disagree on how many entries there are: "
     "entries were deleted or added outside agentledger.",
     "the size the log (or the signed checkpoint) records",
     "the number of entries the file holds"),
    ("log.root", "The log's root no longer matches the signed checkpoint: entries changed.",
     "the root the signed checkpoint records", "the root of the entries the file holds"),
    ("log.leaf", "The workspace log is out of order: a leaf is missing or repeated.",
     "the next leaf of the log", "what the file holds there"),
    ("log.unlogged", "An entry is not in the workspace log.",
     "a leaf of the workspace log", "none"),
    ("log.tiles", "The stored tree of the log (its tiles) is not the tree of the entries or of the "
     "signed checkpoint.",
     "the tree of the logged entries, or of the signed checkpoint", "what the stored tiles give"),
    ("log.inclusion", "A run's entry is not the leaf the signed log holds at its place: "
     "it was edited, re-chained or added after signing.",
     "the leaf of the signed checkpoint at this place", "what the entry gives now"),
    ("log.unsigned", "An entry of a named run was added after the newest signed checkpoint.",
     "an entry of the signed log", "a leaf past the newest checkpoint"),
    ("log.incomplete", "Entries of the signed log are missing from the file (or replaced at their "
     "positions), so a named run cannot be certified complete.",
     "the entries the signed checkpoint counts", "which the file is missing or holds replaced"),
    ("log.state", "The log's stored frontier disagrees with the entries.",
     "the log state the entries give", "the stored frontier"),
    ("log.consistency", "The log does not extend the checkpoint verified before.",
     "a log that extends the verified checkpoint", "the consistency proof fails"),
    ("log.rollback", "The ledger is older than a checkpoint taken from it, or forked: it was "
     "rolled back.",
     "the checkpoint the ledger must extend", "what the file holds"),
    ("checkpoint.missing", "The ledger has entries but no signed checkpoint.",
     "a signed checkpoint", "none"),
    ("checkpoint.malformed", "A checkpoint note does not parse.",
     "a checkpoint note", "the parse error"),
    ("checkpoint.signature", "A checkpoint is not signed by any trusted key.",
     "a signature by a trusted key", "the signer names the note holds"),
    ("checkpoint.origin", "A checkpoint was made for another ledger.",
     "the ledger id the signed checkpoint names", "this ledger's id"),
    ("checkpoint.history", "An older checkpoint's root is not the root of the log's first entries "
     "at its size: the log's history was rewritten.",
     "the root the older signed checkpoint records", "the root the log's first entries give now"),
    ("checkpoint.history_missing", "A checkpoint of the log's history (one per power of two) "
     "was deleted; the next signature restores it from the tiles.",
     "a checkpoint of the log's first entries at that size", "none"),
    ("checkpoint.columns", "A checkpoint's size/root columns disagree with its signed note.",
     "the size and root the signed note records", "the size and root columns"),
    ("checkpoint.frontier", "A checkpoint's stored frontier does not give its signed root.",
     "the root the signed note records", "the root of the stored frontier"),
    ("archive.extended", "An archive was changed after it was sealed.",
     "the size the seal records", "the size the archive holds"),
    ("archive.source", "An archived entry is not proven in its source ledger's signed log (the "
     "source checkpoint and inclusion proofs the archive carries).",
     "the entry at its position in the source's signed checkpoint",
     "what the proof or the source checkpoint gives"),
    # ---- bookkeeping anchored in the signed log -------------------------------------------
    ("prune.receipt", "A garbage collection's prune receipt is not signed by a trusted key over "
     "this ledger's log.",
     "a receipt of this ledger's log, signed by a trusted key", "what is wrong with it"),
    ("prune.anchor", "The prune receipts the table holds are not the ones the signed log pins: "
     "a receipt was deleted or added.",
     "the receipts the gc bookkeeping run pins", "the receipts the table holds"),
    ("team.roles", "The team roles table differs from the team loads the signed log pins.",
     "the role the team bookkeeping run pins", "the row the team_roles table holds"),
    ("team.load", "A team load records other roles than the manifest it pins declares, or "
     "its manifest does not read back.",
     "the roles the pinned manifest declares", "the roles the team.loaded entry records"),
    # ---- the file's own schema ---------------------------------------------------------
    ("schema.altered", "The file's SQL schema is not the one agentledger creates (a trigger, "
     "view or changed table could make its queries lie); no other check ran.",
     "the schema agentledger creates", "what the file's schema holds"),
    ("schema.btree", "SQLite's own b-trees disagree: an index does not hold exactly its table's "
     "rows (rebuilt as a partial index with its SQL put back, or damaged), so queries "
     "answered from it could hide rows; no other check ran.",
     "every index holds exactly its table's rows", "what SQLite's integrity check found"),
    # ---- phase evidence ----------------------------------------------------------------
    ("phase.evidence", "A run's phase evidence does not re-derive from its recorded compiler "
     "inputs.",
     "what the recorded inputs and evidence say", "what the entry or its blobs hold"),
    ("phase.descent", "A run's phase descent does not match the parent evidence it names.",
     "what the parent evidence says", "what the descent entry holds"),
    ("phase.transition", "A phase transition does not follow from the evidence and records "
     "before it.",
     "what the evidence in force and the sequence say", "what the transition entry holds"),
    ("phase.approval", "A phase approval is invalid or changed after its decision.",
     "a valid approval, changed only by its decision", "what the approval entry holds"),
    ("phase.authorize", "A recorded authorization decision does not re-derive from the "
     "evidence in force.",
     "the decision the evidence in force gives", "the decision the entry holds"),
    # ---- imported bernstein workdirs ---------------------------------------------------
    ("bernstein.journal", "An imported run's journal file is missing from the import.",
     "the imported journal", "absent"),
    ("bernstein.chain", "bernstein's own journal chain does not verify.",
     "the hash the chain gives", "the hash the journal holds"),
    ("bernstein.line.discarded", "A journal line does not parse; bernstein silently skips it.",
     "a JSON object", "unparsable"),
    ("bernstein.stage", "An activity stage of an imported run does not verify.",
     "ok", "why it fails"),
    ("bernstein.crash", "bernstein's own verifier raises on this data.",
     "a verdict", "the error"),
    ("bernstein.index", "A journal row's stored index differs from its position (bernstein "
     "does not hash it).",
     "the row's position", "the index the row holds"),
    ("bernstein.payload_hash", "A row's stored payload_hash differs from the recomputed one "
     "(bernstein does not check it).",
     "the payload hash recomputed from the row", "the payload_hash the row holds"),
    ("bernstein.duplicate_key", "A journal line repeats a key; only the last value is hashed.",
     "each key once", "the repeated key"),
    ("bernstein.blob.missing", "The journal references bytes the workdir's store lacks.",
     "the referenced hash", "absent"),
    ("bernstein.report.missing", "A browser stage's stored flow report is not in the "
     "store, though its observations are those of bernstein's flow worker, which always "
     "stores the report: it was removed (bernstein skips a missing report silently). "
     "Research stages are never reported: nothing tells the worker that stores a report "
     "from a legacy writer that never did.",
     "the anchored artifact_hash", "absent (or no .sdd/cas)"),
    ("bernstein.receipt.self_asserted", "The receipt's only signer is the key it embeds, so "
     "anyone could have signed it.",
     "a trusted signer", "the embedded key"),
    ("bernstein.audit.missing_record", "A journal activity has no audit record at its "
     "index, though the workdir's audit chain mirrors activities: its record was cut (cutting "
     "the chain's last records leaves it valid), or the run was written without the mirror; "
     "the two cannot be told apart, and nothing vouches for the row.",
     "an audit record", "none"),
    ("bernstein.audit.missing_from_journal", "An audited stage is not in the journal.",
     "a journal row", "none"),
    ("bernstein.audit.mismatch", "An audit record disagrees with the journal row.",
     "what the audit record says", "what the journal row holds"),
    ("bernstein.audit.chain", "bernstein's audit chain does not verify.",
     "a verifying record", "why it does not verify"),
    ("bernstein.anchor.missing", "An imported run has no import entry anchoring its files.",
     "an import entry", "no entry"),
    ("bernstein.anchor.path", "An imported journal is filed under another path than the one "
     "its import entry anchors.",
     "the path the import entry anchors", "the path the file is filed under"),
    ("bernstein.anchor.journal", "An imported journal's bytes differ from those its import "
     "entry anchors.",
     "the journal hash the import entry anchors", "the hash of the journal held now"),
    ("bernstein.anchor.import", "An import's manifest is not anchored by its workdir entry.",
     "the manifest the workdir entry anchors", "what the import holds"),
    ("bernstein.anchor.file", "An imported file differs from what its import anchors.",
     "what the import manifest anchors", "what the file holds now"),
    ("bernstein.anchor.blob_missing", "An imported file's bytes are not in the blob store.",
     "the anchored hash", "absent"),
    ("bernstein.anchor.manifest", "An import's manifest bytes do not hash to the anchored hash.",
     "the manifest hash the import entry anchors", "the hash of the manifest held now"),
    ("bernstein.anchor.run_row", "An imported run's row in the bernstein_runs table is "
     "missing, though the native chain pins its import: the run is verified all the same.",
     "the journal path the import pins", "absent"),
    # ---- bernstein's seal, checkpoints and witnesses (bernstein/sealed_history.py) ----
    ("bernstein.seal.truncated", "A day file of the audit chain is shorter than its seal "
     "pinned: records were cut (the chain itself can stay intact).",
     "the byte length the seal pinned", "the bytes the file holds now"),
    ("bernstein.seal.changed", "The bytes a seal pinned of a day file were changed.",
     "the leaf hash the seal pinned", "the leaf hash of the file's pinned prefix now"),
    ("bernstein.seal.deleted", "A day file the seal names is gone.",
     "sealed", "absent"),
    ("bernstein.seal.inserted", "A day file is in the audit folder but not in the newest "
     "seal: it was added (or its name changed) after the seal.",
     "absent", "present"),
    ("bernstein.seal.root", "The seal's leaves no longer rebuild its root: the seal itself "
     "was edited.",
     "the root the seal records", "the root its leaves rebuild"),
    ("bernstein.tile", "A tile of the audit folder no longer describes its day file: a hash "
     "tile whose pinned prefix is gone, shorter or hashes otherwise, or a snapshot tile that "
     "is not a prefix of it (bernstein's verify does not read tiles).",
     "the day file's sealed prefix", "why the tile does not match"),
    ("bernstein.seal.unreadable", "A seal file is not a seal document bernstein can read.",
     "a seal document", "why it cannot be read"),
    ("bernstein.seal.checkpoint", "The newest seal's root is not the root of the last "
     "checkpoint: one of them was replaced, or the checkpoint was not recorded.",
     "the last checkpoint's root", "the newest seal's root"),
    ("bernstein.checkpoint.line", "A line of the checkpoints ledger is not a checkpoint "
     "signed under the audit key and linked to the one before it: it was edited, removed, "
     "re-ordered or forged.",
     "a signed checkpoint linked to the one before", "why the line fails"),
    ("bernstein.checkpoint.torn", "The checkpoints ledger ends in an incomplete line "
     "(bernstein skips it as a crashed append; the previous checkpoint stays in force).",
     "complete lines", "an incomplete last line"),
    ("bernstein.checkpoint.pointer", "latest.json does not name a checkpoint the ledger "
     "holds (or is gone, or not signed): the ledger was cut back over a published pin, or "
     "the pointer was forged.",
     "the checkpoint latest.json should name", "what latest.json holds"),
    ("bernstein.checkpoint.pointer_behind", "latest.json names an older checkpoint than "
     "the ledger's newest (bernstein accepts it: a crash between the append and the "
     "publish leaves it so).",
     "the ledger's newest checkpoint", "the checkpoint latest.json names"),
    ("bernstein.checkpoint.extension", "The audit history no longer extends the last "
     "checkpoint: a pinned day file shrank, changed or went, the chain holds fewer records "
     "or starts elsewhere.",
     "what the checkpoint pins", "what the history holds now"),
    ("bernstein.witness.file", "The witness co-signatures file has a line bernstein "
     "cannot read.",
     "readable co-signatures", "why the line fails"),
    ("bernstein.run_receipt.head", "The journal departs from the rows its signed run "
     "receipt embeds: rows were cut from its tail (bernstein's chain and its verify receipt, "
     "which reads the receipt alone, both pass that) or changed. The receipt's signature is "
     "not checked here.",
     "the rows and head the receipt embeds", "what the journal holds now"),
    ("bernstein.run_receipt.unreadable", "A run receipt has no embedded journal rows to "
     "compare (bernstein's verify receipt calls it malformed).",
     "a run receipt", "why it cannot be read"),
    ("bernstein.lineage.journal", "The journal's bytes are not those its lineage spine "
     "sealed at the run's end (nothing writes the journal after that seal): rows were cut "
     "or changed, envelope fields included.",
     "the journal digest and head the spine sealed", "the journal's digest and head now"),
    ("bernstein.lineage.chain", "A run's lineage spine fails bernstein's own verify: a line "
     "that does not parse or lacks a field, a broken link, an entry_hash or (with "
     "--audit-key) an HMAC tag that does not recompute.",
     "an entry bernstein's spine verify accepts", "why the line fails"),
    ("bernstein.lineage.activity", "An entry of the lineage store's log is not active as "
     "bernstein's audit verify requires: revoked by a record of the audit chain, deriving "
     "from an entry the log does not hold, or not readable by bernstein.",
     "an active entry", "why it is not"),
    ("bernstein.seal_anchor.head", "The journal's head is not the sealed head the run's "
     "seal anchor names: its tail was cut or changed after the seal.",
     "the head the seal anchor names", "the journal's head now"),
    ("bernstein.seal_anchor.token", "A seal anchor's RFC 3161 token does not parse, or its "
     "imprint is not the sealed head (its TSA is checked only with --tsa-bundle).",
     "a token over the sealed head", "why it is not"),
    ("bernstein.seal_anchor.tsa", "With --tsa-bundle: a seal anchor's RFC 3161 token was "
     "not signed by a TSA the bundle vouches for, or its signer certificate is not marked "
     "for timestamping.",
     "a TSA the trust bundle vouches for", "why it is not"),
    ("bernstein.seal_anchor.unreadable", "A seal anchor names no sealed head.",
     "a seal anchor", "unreadable"),
    ("bernstein.rfc3161.file", "The RFC 3161 anchors file has a line bernstein cannot read.",
     "readable anchors", "why the line fails"),
    ("bernstein.rfc3161.token", "An RFC 3161 anchor's token does not parse, or its message "
     "imprint is not the digest of the checkpoint it anchors (its TSA is checked only with "
     "--tsa-bundle: bernstein.rfc3161.tsa).",
     "a token over the anchored checkpoint", "why it is not"),
    ("bernstein.rfc3161.tsa", "With --tsa-bundle: an RFC 3161 anchor's token was not signed "
     "by a TSA the bundle vouches for (no path to a bundled certificate at the token's time, "
     "a signature or message digest that does not verify), or its signer certificate is not "
     "marked for timestamping.",
     "a TSA the trust bundle vouches for", "why it is not"),
    ("bernstein.rfc3161.contradiction", "The audit history contradicts an RFC 3161 anchor: "
     "fewer records than a TSA timestamped, another origin, or an anchored checkpoint no "
     "longer on record.",
     "a history extending what was timestamped", "what contradicts it"),
    ("bernstein.witness.signature", "A witness co-signature does not verify under any key "
     "given with --trust: it was forged or edited, or its witness is not trusted.",
     "a co-signature by a trusted key", "why it does not verify"),
    ("bernstein.witness.contradiction", "The audit history contradicts a witness "
     "co-signature, or (subject `--witness-state`) the witness's own pin: fewer records "
     "than co-signed or pinned, another origin, or a witnessed checkpoint no longer on "
     "record. A rollback of the log host that took the co-signatures with it is found only "
     "from the pin.",
     "a history extending what was co-signed (or what the witness's state pins)",
     "what contradicts it"),
    ("bernstein.witness.state", "A pin in the witness state folder (`verify --witness-state "
     "DIR`) is one bernstein's verifier raises on (a count `int()` refuses, a leaf that is "
     "not an object, JSON its reader does not catch): bernstein's audit verify exits 1 on "
     "it.",
     "pins bernstein's verifier reads", "why the pin cannot be read"),
    # ---- fleet verify (fleet/task.py) -------------------------------------------------
    ("fleet.checkpoint", "`fleet verify --checkpoints DIR` holds no exported checkpoint of "
     "this ledger, so nothing shows it was not rolled back.",
     "an exported checkpoint of this ledger id in the folder", "none"),
)

UNKNOWN = CheckInfo(
    "?",
    "A check this version has no explanation for.",
    "what the anchored record says must be there",
    "what the file holds now",
)


def explain(check: str) -> CheckInfo:
    """The table's row for ``check`` (a generic one for an id it does not know)."""
    found = CHECKS.get(check)
    if found is None:
        return CheckInfo(check, UNKNOWN.means, UNKNOWN.expected, UNKNOWN.actual)
    return found


def _steps(first: int, last: int) -> str:
    return f"step {first}" if first == last else f"steps {first}..{last}"


def _int(text: str) -> int | None:
    try:
        return int(text)
    except ValueError:
        return None


EDITED = "the bytes changed after they were written"
MISFILED = {
    # Columns beside the bytes (the bytes themselves may be intact: no entry.hash then).
    "entry.run": "filed under another run than its bytes name",
    "entry.seq": "filed at another step than its bytes name",
    "entry.kind": "the kind column and the kind in its bytes disagree",
}


def says(check: str, expected: str, actual: str, seq: int | None = None) -> str | None:
    """One finding in words a reader needs (which steps are missing, what changed), the
    one phrasing ``show``, the terminal report, the HTML and ``--json`` (``says``) all use;
    None when its expected and actual say it best."""
    if check == "run.head_seq":
        chain, cache = _int(expected), _int(actual)
        if chain is not None and cache is not None:
            if cache > chain:
                removed = _steps(chain + 1, cache)
                verb = "was" if chain + 1 == cache else "were"
                return (
                    f"{removed} {verb} removed from its end: the chain ends at step {chain}, "
                    f"the runs table records step {cache} as the last (or the cache was edited)"
                )
            return (
                f"the runs table records step {cache} as the last, the chain ends at step "
                f"{chain}: the cache was edited"
            )
    if check in ("chain.gap", "chain.order") and seq is not None:
        first = _int(expected)
        if check == "chain.gap" and first is not None and first < seq:
            return f"{_steps(first, seq - 1)} missing before step {seq}: deleted from the chain"
        return f"the chain expected step {expected} here"
    if check == "chain.prev":
        return "the entry before it was changed, removed or replaced"
    if check == "activity.evidence_set_hash":
        return "its observation hashes no longer give the pinned hash"
    if check in ("entry.hash", "entry.json", "entry.canonical"):
        return EDITED
    if check in MISFILED:
        return MISFILED[check]
    if check == "blob.missing":
        return f"{expected} is not in the blob store"
    if check == "log.rollback":
        return (
            "older than what this install signed or verified; if you restored it from a "
            "backup on purpose, `agentledger checkpoint --adopt-restored` makes it the base"
        )
    return None


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def markdown() -> str:
    """``docs/CHECKS.md``: every check id with its meaning and its two sides."""
    lines = [
        "# Verification checks",
        "",
        "<!-- Generated by `python -m agentledger.checks --markdown` from "
        "python/agentledger/checks.py; do not edit by hand. -->",
        "",
        "Every finding of `agentledger verify` (and `show`) names one of these checks. "
        "`agentledger explain CHECK` prints one row; `agentledger explain` lists them all.",
        "",
        f"One meaning for the two sides of every finding: **{RULE}** The reports show "
        "*expected* in a neutral colour and *actual* in red.",
    ]
    for family, rows in groupby(CHECKS.values(), key=lambda info: info.family):
        lines += ["", f"## `{family}.*`", "", "| check | means | expected | actual |"]
        lines.append("|---|---|---|---|")
        for info in rows:
            cells = (f"`{info.id}`", info.means, info.expected, info.actual)
            lines.append("| " + " | ".join(_cell(cell) for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if args != ["--markdown"]:
        print("usage: python -m agentledger.checks --markdown", file=sys.stderr)
        return 64
    sys.stdout.write(markdown())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())


__all__ = ["CHECKS", "EDITED", "RULE", "CheckInfo", "explain", "markdown", "says"]
