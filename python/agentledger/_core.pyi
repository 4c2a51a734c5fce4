# Exact type stub of the compiled extension (rust/python). Keep in sync with the Rust code.
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypedDict, final

from typing_extensions import Buffer

__version__: str

HashName = Literal["blake3", "sha256"]

MAX_DEPTH: int
"""Deepest nesting of arrays/objects that canonicalization accepts."""

class CanonicalizationError(ValueError):
    """A value or JSON text that has no RFC 8785 canonical form."""

# ---- canonical JSON (RFC 8785) -------------------------------------------------------

def canonicalize(value: object) -> bytes:
    """RFC 8785 bytes of a value: dict[str, ...], list/tuple, str, int, float, bool, None."""

def canonicalize_json(data: bytes | str) -> bytes:
    """Parse JSON text (numbers as IEEE-754 doubles) and return its RFC 8785 bytes."""

# ---- hashing ---------------------------------------------------------------------------

def blake3_hex(data: Buffer) -> str:
    """``"blake3:" + hex(BLAKE3(data))``: the content address of exact bytes."""

def sha256_hex(data: Buffer) -> str:
    """``"sha256:" + hex(SHA-256(data))``."""

def domain_hash(domain: str, data: Buffer) -> bytes:
    """32-byte BLAKE3 in derive-key mode with context ``"agentledger/v1/" + domain``."""

def hmac_sha256(key: Buffer, data: Buffer) -> bytes: ...
def hkdf_sha256(ikm: Buffer, salt: Buffer | None, info: Buffer, length: int) -> bytes: ...
@final
class Blake3Hasher:
    """Streaming BLAKE3 (large updates release the GIL)."""

    def __new__(cls) -> Blake3Hasher: ...
    def update(self, data: Buffer) -> None: ...
    def hex_digest(self) -> str:
        """``"blake3:<hex>"`` of everything fed so far."""

@final
class Sha256Hasher:
    def __new__(cls) -> Sha256Hasher: ...
    def update(self, data: Buffer) -> None: ...
    def hex_digest(self) -> str:
        """``"sha256:<hex>"`` of everything fed so far."""

# ---- Merkle trees (RFC 9162 shape) -----------------------------------------------------

def merkle_root(leaves: Sequence[bytes], hash: HashName = "blake3") -> bytes: ...
def merkle_root_of_hashes(hashes: bytes, hash: HashName = "blake3") -> bytes:
    """The root of a tree given its leaf hashes, concatenated (32 bytes each)."""

def inclusion_proof(
    leaves: Sequence[bytes], index: int, hash: HashName = "blake3"
) -> list[bytes]: ...
def verify_inclusion(
    leaf: bytes,
    index: int,
    size: int,
    proof: Sequence[bytes],
    root: bytes,
    hash: HashName = "blake3",
) -> bool: ...
def consistency_proof(
    leaves: Sequence[bytes], old_size: int, hash: HashName = "blake3"
) -> list[bytes]: ...
def verify_consistency(
    old_size: int,
    new_size: int,
    old_root: bytes,
    new_root: bytes,
    proof: Sequence[bytes],
    hash: HashName = "blake3",
) -> bool: ...
@final
class IncrementalMerkleTree:
    """Append-only Merkle tree keeping only O(log n) state (the right frontier)."""

    def __new__(cls, hash: HashName = "blake3") -> IncrementalMerkleTree: ...
    @staticmethod
    def from_state(
        size: int, frontier: Sequence[bytes], hash: HashName = "blake3"
    ) -> IncrementalMerkleTree: ...
    @property
    def size(self) -> int: ...
    def frontier(self) -> list[bytes]:
        """The subtree roots that, with ``size``, restore the tree (``from_state``)."""
    def append(self, leaf: bytes) -> int:
        """Append a leaf (its data, not its hash); return its index."""
    def root(self) -> bytes: ...

# ---- Ed25519 ---------------------------------------------------------------------------

def ed25519_verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Strict verification: the same decision as libsodium's crypto_sign_verify_detached."""

def ed25519_verify_batch(items: Sequence[tuple[bytes, bytes, bytes]]) -> list[bool]:
    """Verify (public_key, message, signature) triples in parallel with the GIL released."""

# ---- run journals (rust/core/src/journal/, rust/python/src/entry.rs) ---------------------

MAX_FINDINGS_PER_RUN: int

def encode_entries(
    run_id: str, first_seq: int, prev: str, ts: str, items: Sequence[tuple[str, object]]
) -> list[tuple[bytes, bytes]]:
    """Canonical bytes and hash of consecutive entries of one run, each chained to the last."""
@final
class Entry:
    """One journal entry as stored, immutable; ``body`` is parsed from ``raw`` on each
    access (a fresh object), or a copy of the body given to the constructor."""

    def __new__(
        cls,
        run_id: str,
        seq: int,
        kind: str,
        hash: str,
        prev: str,
        ts: str,
        body: Any,
        raw: bytes,
    ) -> Entry: ...
    @classmethod
    def from_row(cls, run_id: str, seq: int, kind: str, digest: bytes, raw: bytes) -> Entry:
        """The entry of a stored row; ``ValueError``, ``KeyError`` or ``TypeError`` for
        bytes that are not an entry's JSON object."""
    @property
    def run_id(self) -> str: ...
    @property
    def seq(self) -> int: ...
    @property
    def kind(self) -> str: ...
    @property
    def hash(self) -> str: ...
    @property
    def prev(self) -> str: ...
    @property
    def ts(self) -> str: ...
    @property
    def body(self) -> Any: ...
    @property
    def raw(self) -> bytes: ...
    def __eq__(self, other: object) -> bool: ...
    def __hash__(self) -> int: ...
    def __reduce__(self) -> tuple[type[Entry], tuple[Any, ...]]: ...

def append_entries(
    connection: int,
    run_id: str,
    first_seq: int,
    prev: str,
    ts: str,
    items: Sequence[tuple[str, object]],
    log_size: int,
    log_frontier: Sequence[bytes],
) -> tuple[list[Entry], bytes, int, list[bytes], bytes]:
    """Insert ``items`` (``(kind, body)``) as entries ``first_seq..`` of ``run_id``, chained
    from ``prev``, through the SQLite handle ``connection`` (``storage/native.py``) inside
    its transaction, as the next leaves of the log ``(log_size, log_frontier)``. Returns
    ``(entries, last entry's hash, log size, log frontier, leaf
    hashes)``, the leaf hashes concatenated (32 bytes each, for the log's tiles).
    ``CanonicalizationError`` before anything is written; ``SqliteError`` on a failure of
    SQLite (the caller's transaction is then to be rolled back)."""

def genesis_prev(ledger_id: str, run_id: str) -> str: ...
def evidence_set_hash(hashes: Sequence[str]) -> str: ...
def entry_hash(data: bytes) -> bytes: ...

# ---- the workspace log (rust/core/src/log.rs) --------------------------------------------

def log_leaf(run_id: str, seq: int, entry_hash: bytes) -> bytes:
    """Leaf data of an entry: ``domain_hash("log-leaf", JCS({"entry", "run", "seq"}))``."""

def log_extend(
    size: int,
    frontier: Sequence[bytes],
    rows: Sequence[tuple[int, str, int, bytes]],
    jobs: int = 0,
) -> tuple[int, list[bytes], bytes, tuple[int, int] | None]:
    """Append ``(leaf, run_id, seq, hash)`` rows to a log state: ``(size, frontier, root, gap)``."""

# ---- Python json compatibility and bernstein journals (rust/core/src/pyjson*) ----------

AUDITED_FIELDS: tuple[str, ...]
"""The activity fields a bernstein audit record repeats, compared with the journal row."""

PyJsonMode = Literal["py-json-v1", "py-json-unicode", "jcs-v2"]

def pyjson_dumps(text: bytes, mode: PyJsonMode) -> bytes:
    """Parse as Python's ``json.loads`` and re-serialize: ``py-json-v1`` is
    ``json.dumps(v, sort_keys=True, separators=(",", ":"))``, ``py-json-unicode`` the same
    with ``ensure_ascii=False``, ``jcs-v2`` bernstein's RFC 8785. ValueError if Python
    would refuse the text or the value has no such form."""

def pyjson_float_repr(x: float) -> str:
    """Python's ``repr(float)``, computed in Rust."""

class BernsteinActivity(TypedDict):
    step: int
    line: int
    event_hash: str
    stage_id: str
    kind: str
    artifact_hash: str
    evidence_set_hash: str
    terminal_state: str
    reason_code: str
    observations: list[tuple[str, str, str]]
    recomputed_evidence_set_hash: str | None
    recompute_error: str | None
    reattach: tuple[Literal["ok", "missing", "mismatch", "unresolved"], int] | None
    artifact_stored: str | None
    """With a store index: the digest stored under ``artifact_hash`` ("" if none)."""

BernsteinSettled = tuple[int, str, str, str, bool, str, str, str, str]
"""A settled stage (``compact``): ``(step, stage_id, kind, artifact_hash, has_observations,
evidence_set_hash, terminal_state, reason_code, event_hash)``."""

class BernsteinJournal(TypedDict):
    profile: str
    chain_consistent: bool
    error: str | None
    crash: str | None
    divergent_index: int | None
    divergent_line: int | None
    divergent_field: str | None
    expected_hash: str | None
    actual_hash: str | None
    head: str
    count: int
    physical_lines: int
    file_sha256: str
    discarded_lines: list[int]
    row_findings: list[tuple[int, int, str, str, str]]
    row_finding_count: int
    activities: list[BernsteinActivity | BernsteinSettled]
    """Only dicts unless ``compact``."""
    settled_referenced: list[str]
    """``compact``: the content hashes of the settled stages' observations."""

@final
class BernsteinStoreIndex:
    """``content hash -> digest of the stored bytes``, built in Rust from the ``path,
    kind, digest`` rows of ``bernstein_files`` that ``sql`` selects on the SQLite handle
    ``connection``: each ``cas`` file whose name (the path after ``name_from`` characters)
    has no ``/``, keyed ``sha256:<name>``. ``bernstein_verify_journals`` and
    ``bernstein_ledger_pass`` take it as it is."""

    def __new__(cls, connection: int, sql: str, name_from: int) -> BernsteinStoreIndex: ...
    def get(self, content_hash: str) -> str | None: ...
    def __len__(self) -> int: ...

def bernstein_verify_journals(
    journals: Sequence[bytes],
    jobs: int = 0,
    store: BernsteinStoreIndex | dict[str, str] | None = None,
    compact: bool = False,
) -> list[BernsteinJournal]:
    """bernstein's reader and chain walk over each journal file, in parallel, GIL released.

    ``store`` (content hash -> digest of the bytes stored under it) makes each activity's
    ``reattach`` the first observation that is missing or mismatching (``("ok", -1)``).
    ``compact`` (with ``store``): a stage settled by this pass alone (evidence set
    recomputes, observations reattach, no stored report or receipt) is a tuple."""

def sha256_hex_many(items: Sequence[bytes], jobs: int = 0) -> list[str]:
    """``"sha256:<hex>"`` of each buffer, in parallel with the GIL released."""
@final
class BernsteinAuditMirror:
    """A clean audit chain's ``activity.result`` records, kept in Rust."""

    def records(
        self, run_id: str | None = None
    ) -> list[tuple[int, int, str | None, int, dict[str, str]]]:
        """``(segment, line, run_id, journal_index, {audited name: str(value)})`` of each
        record in chain order; only those of ``run_id`` when given."""
    def __len__(self) -> int: ...

def bernstein_audit_clean(
    segments: Sequence[bytes], keys: tuple[bytes, bytes] | None = None, jobs: int = 0
) -> tuple[int, BernsteinAuditMirror] | None:
    """A bernstein audit chain that verifies clean: its record count and its
    ``activity.result`` records; ``None`` when any line needs the exact walk. ``keys``:
    the scheme 1 and 2 HMAC keys."""
@final
class BernsteinFiles:
    """The imported files table, read once in Rust: the rows ``sql`` selects on the SQLite
    handle ``connection`` in path order (``path, kind, digest, import_id, blob absent``);
    the store index as ``BernsteinStoreIndex`` builds it (``name_from``). The rows are
    made sense of on a thread of their own; the attributes wait for it."""

    absent: list[tuple[str, str]]
    """``(path, digest)`` of the files whose blob the ledger lacks, in path order."""
    store_index: BernsteinStoreIndex
    import_ids: list[int]
    """The import ids the rows hold, in order."""

    def __new__(cls, connection: int, sql: str, format: str, name_from: int) -> BernsteinFiles: ...
    def manifest(self, import_id: int) -> bytes:
        """``importer.manifest_of`` over the import's rows (none: an empty list)."""
    def manifest_hash(self, import_id: int) -> str:
        """``content_hash(manifest(import_id))``, hashed in Rust without a copy."""

@final
class DigestSet:
    """Content digests (``sha256:<hex>`` names of ledger blobs), held in Rust."""

    def __new__(cls) -> DigestSet: ...
    def update(self, digests: Sequence[str]) -> None: ...
    def __len__(self) -> int: ...

def sha256_check_blobs(
    connection: int, sql: str, digests: DigestSet, jobs: int = 0
) -> tuple[int, list[tuple[str, str]], list[str]]:
    """Re-hash the blob of each digest, read on the SQLite handle ``connection`` by ``sql``
    (``digest, data, idx`` of the chunks of the digests in the JSON array it is given, in
    digest then chunk order) and hashed in parallel: the number of blobs found,
    ``(digest, "sha256:<hex>")`` of each whose bytes hash otherwise, the digests absent."""
@final
class CleanRun:
    """A run bernstein verifies clean, every stage settled in Rust."""

    rows: int
    file_sha256: str
    head: str
    stages: int
    unstored_reports: int
    """Research/browser stages whose report is not in the store."""
    notes: list[tuple[int, Literal["absent", "signer"], str]]
    """In stage order: a data/ops stage without a stored receipt (its ``artifact_hash``),
    a verified receipt (its key, hex)."""
    settled: list[BernsteinSettled] | None
    """The stages, when ``stage_rows`` was given."""
    audit: tuple[list[tuple[int, str, str, str, str]], int | None] | None
    """With a ``mirror``: the strict cross-check's findings ``(step, check, field,
    expected, actual)``, and the last journal index the run's records audit."""

@final
class PendingJournals:
    """The journals of imported runs (``runs``: each id and its journal's path in
    ``bernstein_files``, or ``None``), read on ``connection`` by Rust (``sql`` selects a
    path's chunks in order) and verifying on the pool in the background once this returns;
    ``bernstein_ledger_pass`` finishes them."""

    runs: list[tuple[str, str | None]]

    def __new__(
        cls, connection: int, sql: str, runs: Sequence[tuple[str, str | None]], jobs: int = 0
    ) -> PendingJournals: ...

def bernstein_ledger_pass(
    connection: int,
    journals: PendingJournals,
    blob_sql: str,
    store: BernsteinStoreIndex | None,
    jobs: int = 0,
    *,
    store_blobs_sql: str | None = None,
    mirror: BernsteinAuditMirror | None = None,
    stage_rows: bool = False,
) -> tuple[list[CleanRun | BernsteinJournal | None], DigestSet]:
    """bernstein's verify of imported runs, read from SQLite on ``connection`` by Rust:
    their ``journals`` (each pending object once), and ``blob_sql`` selects a blob's
    chunks by digest. Per run of ``journals.runs``: ``None`` when it has no journal, a
    ``CleanRun`` when every stage settles here (receipts included), else the report of
    ``bernstein_verify_journals`` (``compact`` with a store). Also the digests the clean
    runs reattached, to re-hash (``sha256_check_blobs``); ``store_blobs_sql`` (``digest,
    data, idx`` of every stored blob, each blob's chunks in order) has the store read and hashed
    meanwhile, so that re-hashing reads no more. ``mirror``: clean runs are cross-checked
    with these audit records in Rust (``CleanRun.audit``); ``stage_rows``: clean runs list
    their stages, for a cross-check in Python."""

def verify_journal(
    connection: int,
    ledger_id: str,
    sql: str,
    queries: Sequence[tuple[Sequence[int | str], tuple[str, int, bytes] | None]],
    jobs: int = 0,
    *,
    log: LogAssembler | None = None,
    scan: JournalScan | None = None,
    progress: Callable[[int], object] | None = None,
    batch_rows: int = 16_384,
) -> tuple[
    list[tuple[str, int | None, str, str, str]],
    list[tuple[str, int, int, int, int, bytes]],
    list[str],
]:
    """Verify the rows ``sql`` selects on the SQLite handle ``connection`` (see
    ``storage/native.py``), once per ``(params, carry)`` query, read and verified in Rust:
    ``(findings, run summaries, referenced)`` for all of them, one summary per run. ``sql`` selects
    ``run_id, seq, kind, hash, bytes`` (and ``leaf``, added to ``log``) in (run, seq)
    order; ``progress`` is called with entry counts between batches."""

def verify_blobs(
    connection: int, sql: str, queries: Sequence[Sequence[int | str]]
) -> tuple[int, list[tuple[str, str, str, str]]]:
    """Re-hash the blobs ``sql`` yields on the SQLite handle ``connection`` (rows
    ``(digest, size, chunk_size, idx, data)``, each blob's chunks together in order), once
    per parameter list: ``(blobs checked, [(digest, check, expected, actual)])``."""

# ---- the host SQLite (apsw's own library, through the extension API) ----------------

class SqliteError(RuntimeError):
    """A failure of the host SQLite: ``args`` are ``(result code, message)``."""

def sqlite_bound() -> bool:
    """Whether apsw has loaded this module as an SQLite extension (``storage/native.py``)."""
@final
class JournalScan:
    """Gathers, across the batches of a whole pass, the referenced digests (then not
    returned per batch) and the ``(run_id, seq)`` of rows matching each mark
    ``(kinds, needle)``: ``kind IN kinds AND instr(bytes, needle) > 0``."""

    def __new__(
        cls, marks: Sequence[tuple[Sequence[str], bytes]], limit: int = 100_000
    ) -> JournalScan: ...
    def marked(self, index: int) -> list[tuple[str, int]] | None:
        """Rows mark ``index`` matched, in row order; ``None`` past ``limit``."""
    def referenced(self) -> list[str]:
        """The distinct referenced digests, sorted."""

@final
class LogAssembler:
    """The workspace log rebuilt from leaves arriving in any order (expects ``base..limit``)."""

    def __new__(cls, base: int, frontier: Sequence[bytes], limit: int) -> LogAssembler: ...
    def finish(self) -> tuple[int, list[bytes], bytes, tuple[int, int] | None]:
        """``(size, frontier, root, gap)``; ``gap`` = ``(expected, found)`` leaf out of place."""
