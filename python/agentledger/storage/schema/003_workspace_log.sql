-- agentledger schema 3: the workspace Merkle log, its signed checkpoints, prune receipts.
-- What each column is, and how verify accounts for it, is in docs/FORMAT.md ("Tables").

-- Every entry is a leaf of the workspace log. NULL means "not in the log", which verify
-- reports; entries written before this schema are numbered here, in run order.
ALTER TABLE entries ADD COLUMN leaf INTEGER;

UPDATE entries SET leaf = numbered.n - 1
  FROM (SELECT e.run_id, e.seq, row_number() OVER (ORDER BY r.ordinal, e.seq) AS n
          FROM entries e JOIN runs r ON r.run_id = e.run_id) AS numbered
 WHERE entries.run_id = numbered.run_id AND entries.seq = numbered.seq;

-- The log in leaf order (with the key run_id, seq): proofs, tails, unlogged entries. Verify
-- rebuilds the log from the rows its journal pass reads, so the index stays narrow.
CREATE INDEX entries_by_leaf ON entries (leaf);

-- The log's O(log n) state, updated in the same transaction as every append.
CREATE TABLE log_state (
    id       INTEGER PRIMARY KEY CHECK (id = 1),
    size     INTEGER NOT NULL,  -- leaves in the frontier; cross-checked by verify
    frontier BLOB    NOT NULL,  -- the perfect subtrees' roots, 32 bytes each, largest first
    backfill INTEGER NOT NULL   -- leaves numbered by this migration, folded in by the next write
) STRICT;

INSERT INTO log_state (id, size, frontier, backfill)
VALUES (1, 0, x'', (SELECT count(*) FROM entries));

-- Signed checkpoints (C2SP tlog-checkpoint notes), one per writing transaction.
CREATE TABLE checkpoints (
    id       INTEGER PRIMARY KEY,
    size     INTEGER NOT NULL,  -- copy of the note's size; cross-checked
    root     BLOB    NOT NULL,  -- copy of the note's root; cross-checked
    note     TEXT    NOT NULL,  -- the signed note: what verify and proofs trust
    frontier BLOB    NOT NULL   -- the log frontier at `size`; must hash to `root`
) STRICT;

-- The last checkpoint a verify of the whole workspace found clean (for --incremental).
CREATE TABLE log_verified (
    id            INTEGER PRIMARY KEY CHECK (id = 1),
    checkpoint_id INTEGER NOT NULL,
    verified_at   TEXT    NOT NULL
) STRICT;

-- Signed receipts of garbage collections: which blobs were removed, and why that was safe.
CREATE TABLE prune_receipts (
    id      INTEGER PRIMARY KEY,
    receipt TEXT NOT NULL,  -- canonical JSON (FORMAT.md, "Prune receipts")
    signer  TEXT NOT NULL,  -- ed25519:<hex>
    signature BLOB NOT NULL -- Ed25519 over "agentledger/v1/prune-receipt\n" + receipt
) STRICT;

-- When each blob was stored: GC never collects a blob younger than its grace period, so a
-- writer that stores a blob and then references it is never raced.
CREATE TABLE blob_births (
    digest    TEXT PRIMARY KEY,
    stored_at REAL NOT NULL  -- unix time, seconds
) STRICT;

CREATE TRIGGER blobs_born AFTER INSERT ON blobs
BEGIN
    INSERT OR REPLACE INTO blob_births (digest, stored_at) VALUES (new.digest, unixepoch('subsec'));
END;
