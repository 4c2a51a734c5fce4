-- agentledger schema 1: run journals and the content-addressed blob store.
-- What each column is, and how verify accounts for it, is in docs/FORMAT.md ("Tables").

CREATE TABLE ledger_meta (
    key   TEXT PRIMARY KEY,
    value TEXT NOT NULL
) STRICT;

CREATE TABLE runs (
    run_id    TEXT PRIMARY KEY,
    ordinal   INTEGER NOT NULL UNIQUE,     -- listing order only; verify never trusts it
    head_seq  INTEGER NOT NULL DEFAULT -1, -- cache of the last entry; verify cross-checks it
    head_hash BLOB                         -- cache of the last entry's hash; cross-checked
) STRICT;

CREATE TABLE entries (
    run_id TEXT    NOT NULL REFERENCES runs (run_id),
    seq    INTEGER NOT NULL,
    kind   TEXT    NOT NULL,  -- copy of the entry's "kind", for queries; cross-checked
    hash   BLOB    NOT NULL,  -- domain_hash("entry", bytes); recomputed by verify
    bytes  BLOB    NOT NULL,  -- the canonical entry: what is hashed and chained
    PRIMARY KEY (run_id, seq)
) STRICT, WITHOUT ROWID;

CREATE INDEX entries_by_kind ON entries (kind, run_id);

CREATE TABLE blobs (
    digest     TEXT    PRIMARY KEY,  -- "blake3:<hex>" or "sha256:<hex>" of the exact bytes
    size       INTEGER NOT NULL,     -- total length; cross-checked against the chunks
    chunk_size INTEGER NOT NULL      -- the writer's chunk length; informational
) STRICT;

CREATE TABLE blob_chunks (
    digest TEXT    NOT NULL REFERENCES blobs (digest),
    idx    INTEGER NOT NULL,
    data   BLOB    NOT NULL,
    UNIQUE (digest, idx)
) STRICT;
