//! The members the chain walk reads from a row on the lean path (`lean_row.rs`).

/// The members the walk reads from a lean row, in key order (see [`LeanReader::new`]).
pub(super) const LEAN_READS: [&[u8]; 12] = [
    b"artifact_hash",
    b"event",
    b"event_hash",
    b"evidence_set_hash",
    b"index",
    b"kind",
    b"observations",
    b"payload_hash",
    b"prev_hash",
    b"reason_code",
    b"stage_id",
    b"terminal_state",
];

/// The place of `key` in [`LEAN_READS`] (at compile time).
pub(super) const fn lean_read(key: &str) -> usize {
    let key = key.as_bytes();
    let mut at = 0;
    while at < LEAN_READS.len() {
        let read = LEAN_READS[at];
        let mut same = read.len() == key.len();
        let mut i = 0;
        while same && i < key.len() {
            same = read[i] == key[i];
            i += 1;
        }
        if same {
            return at;
        }
        at += 1;
    }
    panic!("not in LEAN_READS");
}
