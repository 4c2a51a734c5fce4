-- agentledger schema 4: bernstein workdirs imported into the ledger.
-- Every imported file is kept byte for byte as a blob (sha256: name) and listed here by its
-- workdir-relative path, so export rewrites the workdir exactly. Each import's file list is
-- also a blob (its manifest) pinned by an entry in the native chain (docs/FORMAT.md,
-- "Imported bernstein workdirs"), so verify detects any later edit of these tables.

CREATE TABLE bernstein_imports (
    import_id   INTEGER PRIMARY KEY,
    source      TEXT NOT NULL,  -- the workdir path given to `import bernstein`; informational
    imported_at TEXT NOT NULL,
    manifest    TEXT NOT NULL   -- sha256: name of the manifest blob (the files this import added)
) STRICT;

CREATE TABLE bernstein_files (
    path      TEXT PRIMARY KEY,  -- relative to the workdir, '/'-separated: '.sdd/cas/<hex>', ...
    kind      TEXT NOT NULL CHECK (kind IN ('dir', 'journal', 'cas', 'audit', 'other')),
    digest    TEXT,              -- sha256:<hex> of the exact bytes (a blob); NULL for a directory
    import_id INTEGER NOT NULL REFERENCES bernstein_imports (import_id)
) STRICT;

CREATE TABLE bernstein_runs (
    run_id    TEXT PRIMARY KEY REFERENCES runs (run_id),
    path      TEXT NOT NULL UNIQUE REFERENCES bernstein_files (path),
    import_id INTEGER NOT NULL REFERENCES bernstein_imports (import_id)
) STRICT;
