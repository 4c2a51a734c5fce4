-- agentledger schema 5: the workspace log stored as tiles; checkpoints kept sparsely.
-- What each column is, and how verify accounts for it, is in docs/FORMAT.md ("Tables").
-- The migration's Python step (migrations.py) fills log_tiles from the entries in leaf
-- order, folding in the leaves schema 3 numbered, before log_state.backfill is dropped.

-- The tree's hashes, in the shape of C2SP tlog-tiles: level 0 the leaf hashes, level L the
-- roots of 256^L-leaf subtrees, 256 hashes to a tile, the right-most tile of a level partial.
CREATE TABLE log_tiles (
    level  INTEGER NOT NULL,  -- recomputed by verify --all from the entries
    idx    INTEGER NOT NULL,  -- the tile's position in its level
    hashes BLOB    NOT NULL,  -- 32 bytes per hash, 1..256 of them
    PRIMARY KEY (level, idx)
) STRICT;

-- The frontier of a checkpoint is in the tiles; the last clean verify is remembered by the
-- install that ran it ($AGENTLEDGER_HOME), not by the file an attacker can write.
ALTER TABLE checkpoints DROP COLUMN frontier;
DROP TABLE log_verified;

-- When a blob was stored is no longer kept in the file (nothing could check it): garbage
-- collection remembers, outside the ledger, when it first saw a blob unreachable (gc.py).
DROP TRIGGER blobs_born;
DROP TABLE blob_births;
