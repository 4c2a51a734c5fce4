-- agentledger schema 2: the activity boundary's audit mirror and team manifests.
-- What each column is, and how verify accounts for it, is in docs/FORMAT.md ("Tables").

CREATE TABLE audit_log (
    pos    INTEGER PRIMARY KEY,  -- 0..n-1, the record's position in the HMAC chain
    run_id TEXT    NOT NULL,     -- copy of the record's "run"; cross-checked
    seq    INTEGER NOT NULL,     -- copy of the record's "seq"; cross-checked
    record BLOB    NOT NULL,     -- canonical JSON of hashes and labels only; MAC'd
    mac    BLOB    NOT NULL      -- HMAC-SHA256(K, previous mac || record)
) STRICT;

CREATE INDEX audit_by_entry ON audit_log (run_id, seq);

CREATE TABLE team_roles (
    role          TEXT PRIMARY KEY,  -- a role name from a team manifest's [[roles]]
    agent_kind    TEXT NOT NULL,     -- the modality the role runs as (default "coding")
    manifest_hash TEXT NOT NULL,     -- blake3 of the manifest file it came from (a blob)
    loaded_at     TEXT NOT NULL      -- when it was loaded (informational)
) STRICT;
