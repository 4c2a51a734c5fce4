# Exact type stub of the compiled extension (rust/python). Keep in sync with the Rust code.
from collections.abc import Callable, Sequence
from typing import Any, Literal, TypedDict, TypeVar, final

import apsw
from typing_extensions import Buffer

_T = TypeVar("_T")

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

def content_names_in(data: bytes) -> set[str]:
    """The content names (``blake3:``/``sha256:`` + 64 lower-case hex) ``data`` holds,
    leftmost first and never overlapping, as ``re.findall`` finds them."""

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

# ---- Merkle trees (RFC 6962: SHA-256 by default; BLAKE3 for the log before schema 6) --

def merkle_root(leaves: Sequence[bytes], hash: HashName = "sha256") -> bytes: ...
def merkle_root_of_hashes(hashes: bytes, hash: HashName = "sha256") -> bytes:
    """The root of a tree given its leaf hashes, concatenated (32 bytes each)."""

def inclusion_proof(
    leaves: Sequence[bytes], index: int, hash: HashName = "sha256"
) -> list[bytes]: ...
def verify_inclusion(
    leaf: bytes,
    index: int,
    size: int,
    proof: Sequence[bytes],
    root: bytes,
    hash: HashName = "sha256",
) -> bool: ...
def verify_inclusions(
    leaves: Sequence[bytes], proofs: list[Any], size: int, root: bytes, jobs: int = 0
) -> list[bool | None]:
    """``verify_inclusion`` (SHA-256) of each ``[index, [base64 node, ...]]`` proof for its
    leaf, in parallel; None where a proof is not in that plain form (the caller decides)."""

def consistency_proof(
    leaves: Sequence[bytes], old_size: int, hash: HashName = "sha256"
) -> list[bytes]: ...
def verify_consistency(
    old_size: int,
    new_size: int,
    old_root: bytes,
    new_root: bytes,
    proof: Sequence[bytes],
    hash: HashName = "sha256",
) -> bool: ...
def inclusion_proof_ranges(index: int, size: int) -> list[tuple[int, int]]:
    """The leaf ranges ``(start, stop)`` whose roots make leaf ``index``'s audit path."""

def consistency_proof_ranges(old_size: int, new_size: int) -> list[tuple[int, int]]:
    """The leaf ranges whose roots make the consistency proof from ``old_size``."""
@final
class IncrementalMerkleTree:
    """Append-only Merkle tree keeping only O(log n) state (the right frontier)."""

    def __new__(cls, hash: HashName = "sha256") -> IncrementalMerkleTree: ...
    @staticmethod
    def from_state(
        size: int, frontier: Sequence[bytes], hash: HashName = "sha256"
    ) -> IncrementalMerkleTree: ...
    @property
    def size(self) -> int: ...
    def frontier(self) -> list[bytes]:
        """The subtree roots that, with ``size``, restore the tree (``from_state``)."""
    def append(self, leaf: bytes) -> int:
        """Append a leaf (its data, not its hash); return its index."""
    def root(self) -> bytes: ...

TileRead = Callable[[int, int], bytes | None]
"""``read_tile(level, index)``: the stored tile's bytes, None when there is none."""

class LogDamagedError(ValueError):
    """The stored log is not what it must be (a tile cut short, a hash missing)."""

@final
class StoredTree:
    """The log's tree as ``log_tiles`` stores it (C2SP tlog-tiles), its tiles read by calling
    ``read_tile(level, index)`` (the stored bytes, or None when there is no tile) once per
    tile: tiles and nodes read are kept (bounded) for later calls. Damaged tiles raise
    ``LogDamagedError``, an index or size out of range ``ValueError``; what ``read_tile``
    raises is passed on."""

    def __new__(cls) -> StoredTree: ...
    def root(self, read_tile: TileRead, size: int) -> bytes:
        """The root of the tree of the first ``size`` leaves."""
    def frontier(self, read_tile: TileRead, size: int) -> list[bytes]:
        """The perfect subtrees' roots of the tree of ``size`` leaves, largest first."""
    def inclusion_proof(self, read_tile: TileRead, index: int, size: int) -> list[bytes]:
        """RFC 9162 PATH(index, D[0:size]), lowest level first."""
    def inclusion_proofs_base64(
        self, read_tile: TileRead, indices: list[int], size: int
    ) -> list[list[str]]:
        """``inclusion_proof`` of each leaf of ``indices``, each node in standard base64."""
    def consistency_proof(self, read_tile: TileRead, old_size: int, new_size: int) -> list[bytes]:
        """RFC 9162 PROOF(old_size, D[0:new_size])."""
    def hashes(self, read_tile: TileRead, level: int, start: int, count: int) -> bytes:
        """``count`` (1..256) consecutive stored hashes of ``level`` from ``start``, all in
        one tile, concatenated."""

# ---- Ed25519 ---------------------------------------------------------------------------

@final
class Ed25519Signer:
    """The key of a 32-byte ``seed``, expanded once (``ValueError`` for another length)."""

    def __new__(cls, seed: Buffer) -> Ed25519Signer: ...
    def sign(self, message: Buffer) -> bytes:
        """The signature of ``message`` (RFC 8032: the bytes libsodium gives)."""
    @property
    def public_key(self) -> bytes:
        """The 32-byte public key."""

def ed25519_verify(public_key: bytes, message: bytes, signature: bytes) -> bool:
    """Strict verification: the same decision as libsodium's crypto_sign_verify_detached."""

def ed25519_verify_batch(items: Sequence[tuple[bytes, bytes, bytes]]) -> list[bool]:
    """Verify (public_key, message, signature) triples in parallel with the GIL released."""

def signature_memo_begin(known: bytes) -> bool:
    """Activate the process's memo of accepted signatures with ``known`` 32-byte digests;
    False, and nothing changed, when one is active already (signature_memo.py)."""

def signature_memo_end() -> tuple[bytes, int]:
    """Deactivate it: the digests of the triples it accepted that it was not given, and how
    many verifications it answered from those it was given."""

# ---- run journals (rust/core/src/journal/, rust/python/src/entry.rs) ---------------------

MAX_FINDINGS_PER_RUN: int
MAX_ENTRY_BYTES: int

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
        bytes that are not an entry's JSON object (``ValueError``, unparsed, for bytes
        longer than an entry can be: ``limits.MAX_ENTRY_BYTES``)."""
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
    connection: apsw.Connection,
    run_id: str,
    first_seq: int,
    prev: str,
    ts: str,
    items: Sequence[tuple[str, object]],
    log_size: int,
    log_frontier: Sequence[bytes],
) -> tuple[list[Entry], bytes, int, list[bytes], bytes]:
    """Insert ``items`` (``(kind, body)``) as entries ``first_seq..`` of ``run_id``, chained
    from ``prev``, through the apsw connection ``connection`` (``storage/native.py``) inside
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
    """The leaf of an entry: its log-leaf document ``JCS({"entry", "run", "seq"})``."""

def legacy_log_leaf(run_id: str, seq: int, entry_hash: bytes) -> bytes:
    """The leaf of the log before schema 6: ``domain_hash("log-leaf", log_leaf(...))``."""

def log_extend(
    size: int,
    frontier: Sequence[bytes],
    rows: Sequence[tuple[int, str, int, bytes]],
    jobs: int = 0,
    legacy: bool = False,
) -> tuple[int, list[bytes], bytes, tuple[int, int] | None]:
    """Append ``(leaf, run_id, seq, hash)`` rows to a log state: ``(size, frontier, root, gap)``;
    ``legacy``: in the BLAKE3 tree of the log before schema 6."""

def log_rebuild(
    connection: apsw.Connection, sql: str, params: Sequence[int | str]
) -> tuple[int, list[bytes], bytes, tuple[int, int] | None]:
    """The log of the ``(leaf, run_id, seq, hash)`` rows ``sql`` yields with ``params`` (any
    order: sorted by leaf here), rebuilt from the empty tree with SQLite stepped in Rust:
    ``(size, frontier, root, gap)``."""
@final
class LoggedRows:
    """The ``(leaf, run_id, seq, hash)`` of every logged row of ``entries``, kept by the
    read ``check_indexes`` made with ``logged=True``."""

    def rebuild(self, size: int) -> tuple[int, list[bytes], bytes, tuple[int, int] | None]:
        """``log_rebuild`` over the rows whose leaf is in ``0..size``: the same answer."""
    def __len__(self) -> int: ...

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
    activities: list[BernsteinActivity]

@final
class BernsteinStoreIndex:
    """``content hash -> digest of the stored bytes``, built in Rust from the ``path,
    kind, digest`` rows of ``bernstein_files`` that ``sql`` selects on the apsw
    connection ``connection``: each ``cas`` file whose name (the path after ``name_from``
    characters) has no ``/``, keyed ``sha256:<name>``. ``bernstein_verify_journals``
    takes it as it is."""

    def __new__(
        cls, connection: apsw.Connection, sql: str, name_from: int
    ) -> BernsteinStoreIndex: ...
    def get(self, content_hash: str) -> str | None: ...
    def __len__(self) -> int: ...

def bernstein_verify_journals(
    journals: Sequence[bytes],
    jobs: int = 0,
    store: BernsteinStoreIndex | dict[str, str] | None = None,
) -> list[BernsteinJournal]:
    """bernstein's reader and chain walk over each journal file, in parallel, GIL released
    (the import's summaries, and the journal pass of the tests' reference verifier).

    ``store`` (content hash -> digest of the bytes stored under it) makes each activity's
    ``reattach`` the first observation that is missing or mismatching (``("ok", -1)``)."""
@final
class BernsteinAuditMirror:
    """An audit chain's ``activity.result`` records, for ``bernstein_verify_workdir``:
    given as ``(run_id, journal_index, [(audited name, str(value))])`` with strings as
    WTF-8 bytes."""

    def __new__(
        cls, records: Sequence[tuple[bytes, int, Sequence[tuple[str, bytes]]]]
    ) -> BernsteinAuditMirror: ...
    def __len__(self) -> int: ...

@final
class BernsteinAuditWalk:
    """What the walk of a bernstein audit chain found (``rust/bernstein/src/audit/walk.rs``,
    the Python walk of ``tests/bernstein/reference.py`` exactly)."""

    @property
    def records(self) -> int:
        """Lines that parsed as a JSON object."""
    @property
    def problems(self) -> list[tuple[int, int, str, str | None]]:
        """``(segment index, line, reason, run_id)`` of each problem, in chain order (line
        -1: the segment's missing trailing newline)."""
    @property
    def walked(self) -> list[tuple[int, int, str | None, object, dict[str, str]]]:
        """``(segment index, line, run_id, journal_index, {audited name: str(value)})`` of
        each ``activity.result`` record, in chain order; ``journal_index`` as parsed."""
    def unindexed(self) -> list[tuple[int, int, str | None, object, dict[str, str]]]:
        """The same, for the records whose ``journal_index`` is not an integer."""
    @property
    def walked_per_run(self) -> dict[str, int]:
        """How many ``activity.result`` records of each run (``""``: none named) the walk
        met, without converting the records."""
    @property
    def mirrors_activities(self) -> bool:
        """Whether the chain holds an ``activity.result`` record, or a damaged record that
        names its run."""

def bernstein_audit_walk(
    segments: Sequence[bytes], keys: tuple[bytes, bytes] | None = None, jobs: int = 0
) -> BernsteinAuditWalk:
    """Walk a bernstein audit chain (segments in chain order) in parallel, GIL released.
    ``keys``: the scheme 1 and 2 HMAC keys (``None``: the HMACs are not checked)."""

def bernstein_canonical_records(
    segment: bytes, jobs: int = 0
) -> tuple[int, tuple[int, int] | None] | None:
    """The records of one audit segment a checkpoint counts (``checkpoints.canonical_records``):
    how many, and the first one's line as ``(start, end)``; None where a line nests so deeply
    that only Python can say what Python does."""

def bernstein_journal_summary(journal: bytes) -> tuple[int, int, int, tuple[int, int] | None]:
    """``(events, activities, discarded, (start, end) of the last event's line or None)`` of
    one imported journal, its lines read as verify reads them."""

def bernstein_journal_lines(journal: bytes) -> list[tuple[int, bool, int, int]]:
    """``[(physical line, kept, start, end)]``: each line bernstein's reader does not skip
    as blank, numbered from 0 as verify numbers them, and where its bytes lie."""
@final
class BernsteinCheck:
    """What ``bernstein_check`` found, read as plain values."""

    @property
    def import_ids(self) -> list[int]:
        """The import ids the files table holds, in order."""
    @property
    def absent(self) -> list[tuple[str, str]]:
        """``(path, digest)`` of the files whose blob the ledger lacks, in path order."""
    def manifest(self, import_id: int) -> bytes:
        """``importer.manifest_of`` over the import's rows (none: an empty list)."""
    def manifest_hash(self, import_id: int) -> str:
        """``content_hash(manifest(import_id))``, hashed in Rust without a copy."""
    @property
    def audit(self) -> BernsteinAuditWalk | None:
        """The audit chain's walk (``None``: no segments given)."""
    @property
    def runs(self) -> list[BernsteinRun]:
        """One verdict per run, in the order given."""
    @property
    def rehashed(self) -> tuple[int, list[tuple[str, str]], list[str]] | None:
        """The blobs the runs referenced, re-hashed: the number found, ``(digest,
        "sha256:<hex>")`` of each whose bytes hash otherwise, the digests absent; in
        digest order (``None``: not asked for)."""

def bernstein_check(
    connection: apsw.Connection,
    runs: Sequence[tuple[str, str | None]],
    options: BernsteinOptions,
    *,
    files: tuple[str, str, int],
    audit: Sequence[bytes] | None = None,
    keys: tuple[bytes, bytes] | None = None,
    rehash: str | None = None,
    mark: bytes | None = None,
) -> BernsteinCheck:
    """verify's one call for the bernstein runs imported into the ledger open on the apsw
    connection ``connection``, the GIL released throughout: the files table read
    (``files``: ``(sql, manifest format, name_from)``, ``sql`` selecting ``path, kind,
    digest, import_id, blob absent`` in path order), the audit chain's segments ``audit``
    walked (``keys``: its HMAC keys), the runs ``runs`` (``(run id, journal path or
    None)``) verified on the pool and cross-checked with the chain's records when it
    mirrors activities, and with ``rehash`` (the SQL selecting ``digest, data, idx`` of
    the chunks of the digests in a JSON array) the blobs they referenced re-hashed. The
    store index and the chain's records stay in Rust. Ctrl-C is seen between journals.
    With ``mark`` (``sqlite_read_mark``) the pool's threads read on readers of their own
    proven to see ``connection``'s snapshot; without, every read goes through it."""
@final
class BernsteinOptions:
    """How ``bernstein_check`` and ``bernstein_verify_workdir`` read and what they keep:
    plain values only."""

    trusted: list[bytes]
    """Raw Ed25519 keys whose receipts are not self-asserted (``--trust``)."""
    stages: bool
    """Keep every stage's verdict (``BernsteinRun.stages``)."""
    referenced: bool
    """Keep the content hashes reattachment trusted (``BernsteinRun.referenced``)."""
    jobs: int

    def __new__(
        cls,
        *,
        trusted: Sequence[bytes] = ...,
        stages: bool = False,
        referenced: bool = False,
        jobs: int = 0,
    ) -> BernsteinOptions: ...

@final
class BernsteinFinding:
    """One divergence: ``step`` (kept-row index) or ``None``, ``check``, ``field``,
    ``expected`` (what the anchored record says), ``actual`` (what the data holds)."""

    @property
    def step(self) -> int | None: ...
    @property
    def check(self) -> str: ...
    @property
    def field(self) -> str: ...
    @property
    def expected(self) -> str: ...
    @property
    def actual(self) -> str: ...
    @property
    def strict_only(self) -> bool:
        """A finding bernstein's own verdict ignores (strict mode only)."""

@final
class BernsteinClaim:
    """One claim of a stored research report."""

    @property
    def claim_id(self) -> str: ...
    @property
    def ok(self) -> bool: ...
    @property
    def citations_checked(self) -> int: ...
    @property
    def reason(self) -> str: ...

@final
class BernsteinBrowser:
    """A stored browser flow report's verdict."""

    @property
    def ok(self) -> bool: ...
    @property
    def head_anchor_ok(self) -> bool: ...
    @property
    def reason(self) -> str: ...
    def to_json(self) -> dict[str, Any]:
        """bernstein's ``browser_verdict`` object (steps and checks included)."""

@final
class BernsteinStage:
    """One ``activity.result`` stage's verdict."""

    @property
    def stage_id(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def step(self) -> int: ...
    @property
    def ok(self) -> bool: ...
    @property
    def reason(self) -> str: ...
    @property
    def evidence_reattached(self) -> bool: ...
    @property
    def signed_receipt_verified(self) -> bool: ...
    @property
    def claim_verdicts(self) -> list[BernsteinClaim]: ...
    @property
    def browser_verdict(self) -> BernsteinBrowser | None: ...
    def to_json(self) -> dict[str, Any]:
        """The stage in bernstein's ``activity verify --json`` shape."""

@final
class BernsteinRun:
    """One run's verdicts: bernstein's own (``compat_code``) and the strict findings."""

    @property
    def run_id(self) -> str: ...
    @property
    def found(self) -> bool:
        """Any ``activity.result`` row (bernstein's ``found``)."""
    @property
    def ok(self) -> bool: ...
    @property
    def chain_ok(self) -> bool: ...
    @property
    def reason(self) -> str: ...
    @property
    def crash(self) -> str | None:
        """What bernstein's own code would raise on this run instead of answering."""
    @property
    def rows(self) -> int:
        """Kept journal rows."""
    @property
    def activities(self) -> int:
        """``activity.result`` stages verified."""
    @property
    def has_journal(self) -> bool: ...
    @property
    def file_sha256(self) -> str | None:
        """``sha256:<hex>`` of the journal file (what the ledger's anchor pins)."""
    @property
    def head(self) -> str | None: ...
    @property
    def findings(self) -> list[BernsteinFinding]: ...
    @property
    def limits(self) -> list[str]:
        """What no check can see in this run, in words."""
    @property
    def unstored_reports(self) -> int: ...
    @property
    def receipts(self) -> int:
        """Stored DataOps receipts re-checked."""
    @property
    def signatures(self) -> int:
        """Signatures of the receipts that verified."""
    @property
    def stages(self) -> list[BernsteinStage]:
        """Every stage, when the options kept them."""
    @property
    def referenced(self) -> list[str]:
        """The content hashes reattachment trusted, when the options kept them."""
    @property
    def compat_code(self) -> int:
        """bernstein's exit code for ``activity verify``: 0 ok, 1 not found (or bernstein
        itself raises), 2 not ok."""
    def compat_json(self) -> dict[str, Any]:
        """bernstein's ``activity verify --json`` object (the stages when kept)."""

def bernstein_verify_workdir(
    root: str,
    run_ids: Sequence[str],
    options: BernsteinOptions,
    *,
    audit: BernsteinAuditMirror | None = None,
) -> list[BernsteinRun]:
    """Verify the runs ``run_ids`` of the workdir at ``root`` in place, read the way
    bernstein reads it (the directory is its own store)."""

def check_indexes(
    connection: apsw.Connection,
    sql: str,
    columns: Sequence[int],
    key: bytes,
    table: str,
    specs: Sequence[tuple[str, str, Sequence[int]]],
    jobs: int = 0,
    *,
    logged: bool = False,
) -> tuple[list[str], LoggedRows | None]:
    """``verify_journal``'s index check on a read of its own: ``sql`` selects every row of
    ``table`` in primary-key order, the journal pass's columns at positions ``columns``
    (``run_id, seq`` first); each index of ``specs`` is then scanned in its order and
    compared under the 32-byte ``key``. The problems found (empty: every index agrees),
    and with ``logged`` (``hash`` and ``leaf`` among the columns) the logged rows read."""

def verify_journal(
    connection: apsw.Connection,
    ledger_id: str,
    sql: str,
    queries: Sequence[tuple[Sequence[int | str], tuple[str, int, bytes] | None]],
    jobs: int = 0,
    *,
    marks: Sequence[tuple[Sequence[str], bytes]] | None = None,
    marked_limit: int = 100_000,
    log: tuple[int, Sequence[bytes], int] | None = None,
    indexes: tuple[bytes, str, Sequence[tuple[str, str, Sequence[int]]]] | None = None,
    progress: Callable[[int], object] | None = None,
    batch_rows: int = 4_096,
) -> JournalPass:
    """Verify the rows ``sql`` selects on the apsw connection ``connection`` (see
    ``storage/native.py``), once per ``(params, carry)`` query, read and verified in Rust,
    in one call. ``sql`` selects ``run_id, seq, kind, hash, bytes`` (and ``leaf`` with
    ``log``) in (run, seq) order. ``marks`` (``(kinds, needle)``: ``kind IN kinds AND
    instr(bytes, needle) > 0``) records each mark's rows, up to ``marked_limit``; ``log``
    = ``(base, frontier, limit)`` rebuilds the workspace log from the rows' leaves;
    ``indexes`` = ``(key, table, [(index, scan sql, columns in the row)])`` (a whole pass
    with ``log``) compares each index with the rows read, under the 32-byte ``key``
    (``storage/btree_check.py``); ``progress`` is called with entry counts between
    batches."""
@final
class JournalPass:
    """What one ``verify_journal`` found and gathered."""

    @property
    def findings(self) -> list[tuple[str, int | None, str, str, str]]:
        """``(run_id, seq, check, expected, actual)``, at most ``MAX_FINDINGS_PER_RUN`` a run."""
    @property
    def runs(self) -> list[tuple[str, int, int, int, int, bytes]]:
        """``(run_id, entries, activities, findings, last_seq, last_hash)`` per run."""
    @property
    def referenced(self) -> list[str]:
        """The distinct digests the rows reference, sorted."""
    def marked(self, index: int) -> list[tuple[str, int]] | None:
        """Mark ``index``'s ``(run_id, seq)`` in row order (``None`` past the limit, or
        without marks)."""
    @property
    def index_problems(self) -> list[str]:
        """What differs between the table and its indexes, each starting with a b-tree's
        name; empty without ``indexes``."""
    @property
    def log(self) -> tuple[int, list[bytes], bytes, tuple[int, int] | None] | None:
        """The rebuilt log ``(size, frontier, root, gap)``; None without ``log``."""

def verify_blobs(
    connection: apsw.Connection, sql: str, queries: Sequence[Sequence[int | str]]
) -> tuple[int, list[tuple[str, str, str, str]]]:
    """Re-hash the blobs ``sql`` yields on the apsw connection ``connection`` (rows
    ``(digest, size, chunk_size, idx, data)``, each blob's chunks together in order), once
    per parameter list: ``(blobs checked, [(digest, check, expected, actual)])``."""

def verify_blobs_beside(
    connection: apsw.Connection, sql: str, beside: Callable[[], _T], mark: bytes | None = None
) -> tuple[tuple[int, list[tuple[str, str, str, str]]] | None, _T]:
    """``verify_blobs(connection, sql, [()])`` on a reader of its own (proven by ``mark``,
    ``sqlite_read_mark``, to see ``connection``'s snapshot) while ``beside()`` runs with
    ``connection``: ``(blobs, what beside returned)``, the blobs None when no reader could
    be opened or SQLite failed the pass (nothing was re-hashed).
    When ``beside`` raises, the pass stops and the error is raised."""

# ---- the host SQLite (apsw's own library, through the extension API) ----------------
# Every call taking ``connection`` takes the ``apsw.Connection`` itself: anything else is a
# ``TypeError``, a closed one ``apsw.ConnectionClosedError``, one another thread is using
# ``apsw.ThreadingViolationError``.

class SqliteError(RuntimeError):
    """A failure of the host SQLite: ``args`` are ``(result code, message)``."""

def sqlite_bound() -> bool:
    """Whether apsw has loaded this module as an SQLite extension (``storage/native.py``)."""
@final
class StatementCache:
    """A connection's statements kept prepared for ``sqlite_rows``."""

    def __new__(cls, connection: apsw.Connection) -> StatementCache: ...
    def clear(self, connection: apsw.Connection) -> None:
        """Finalize every statement kept (before the connection is closed)."""

def sqlite_rows(
    connection: apsw.Connection,
    sql: str,
    params: Sequence[object] = ...,
    cache: StatementCache | None = None,
) -> list[tuple[Any, ...]]:
    """Every row of ``sql`` with ``params`` (``int``, ``float``, ``str``, ``bytes``,
    ``None``) bound, as apsw's ``fetchall`` gives them, stepped with the GIL held
    (``storage/native.py``: ``rows``)."""

def sqlite_readers(connection: apsw.Connection, count: int, mark: bytes | None = None) -> int:
    """How many of ``count`` read-only connections beside ``connection`` could be opened
    in the snapshot of its current transaction, begun with ``mark`` (``count``, or 0 when
    refused: no transaction or no mark, another VFS, a commit since it began, changes of
    its own); closed again. The bernstein verify's pool threads read through such
    readers."""

def btree_check_tables(
    connection: apsw.Connection, tables: Sequence[str], mark: bytes | None = None
) -> list[list[str]]:
    """SQLite's check (``PRAGMA integrity_check(table)``) of each of ``tables``: its lines
    (``["ok"]`` when the b-trees agree), in the order of ``tables``; checked on
    ``connection`` and, with the mark of its transaction (``sqlite_read_mark``), on a
    reader at once, each taking the next table. Ctrl-C stops both."""

def sqlite_wal_header(connection: apsw.Connection) -> bytes | None:
    """The WAL-index header of the database open on ``connection``, as its SQLite maps it
    now (None: none mapped). Only for a connection in WAL mode."""

def sqlite_read_mark(connection: apsw.Connection, before: bytes | None = None) -> bytes | None:
    """The mark of the transaction ``connection`` has begun, given the ``-shm`` header
    read just before it began (``sqlite_wal_header``; None for a write transaction):
    what proves that readers opened later see its snapshot. None when nothing can be
    proven (then nothing is read beside it)."""
