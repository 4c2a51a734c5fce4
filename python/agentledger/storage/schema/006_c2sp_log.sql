-- agentledger schema 6: the workspace log is a C2SP log (RFC 6962 with SHA-256, leaves the
-- entries' log-leaf documents, tiles as tlog-tiles cuts them). No table changes shape: the
-- migration's Python step (migrations.rebuild_c2sp_tree) rebuilds log_tiles and log_state from
-- the entries, never from the BLAKE3 tiles, and drops the checkpoints signed over the old
-- tree; the first writer to open the file then signs the new one (docs/FORMAT.md §7).
UPDATE log_state SET size = 0, frontier = x'' WHERE id = 1;
