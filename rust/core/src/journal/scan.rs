//! What a whole journal pass gathers for the checks after it, across batches and without
//! a copy of any row: the distinct digests activity results reference, and for each mark
//! `(kinds, needle)` the `(run_id, seq)` of the rows whose kind is one of `kinds` and whose
//! bytes contain `needle` (SQL's `kind IN (...) AND instr(bytes, needle) > 0`), in row
//! order. A mark matching more than `limit` rows stops recording (its rows are then
//! `None`, and the check after reads the table itself), so memory stays bounded.

use memchr::memmem::Finder;
use rayon::prelude::*;

use super::verify::{verify_batch, verify_batch_into, BatchReport, Carry, DigestSet, EntryRow};

/// The `(run_id, seq)` of the rows one mark matched, in row order.
pub type MarkedRows = Vec<(String, i64)>;

/// The marks' matches and the referenced digests, gathered batch after batch.
pub struct JournalScan {
    marks: Vec<(Vec<String>, Finder<'static>)>,
    limit: usize,
    marked: Vec<Option<MarkedRows>>,
    referenced: DigestSet,
}

impl JournalScan {
    /// A scan for `marks` (`(kinds, needle)`), each recording at most `limit` rows.
    pub fn new(marks: Vec<(Vec<String>, Vec<u8>)>, limit: usize) -> Self {
        let marked = marks.iter().map(|_| Some(Vec::new())).collect();
        let marks = marks
            .into_iter()
            .map(|(kinds, needle)| (kinds, Finder::new(&needle).into_owned()))
            .collect();
        JournalScan {
            marks,
            limit,
            marked,
            referenced: DigestSet::default(),
        }
    }

    /// Each mark's rows, in row order (`None` past the limit).
    pub fn into_parts(self) -> (Vec<Option<MarkedRows>>, Vec<String>) {
        let mut referenced: Vec<String> = self.referenced.into_iter().collect();
        referenced.sort_unstable();
        (self.marked, referenced)
    }

    fn record<R: EntryRow>(&mut self, rows: &[R], bits: &[u64]) {
        for (row, &bits) in rows.iter().zip(bits) {
            if bits == 0 {
                continue;
            }
            for (i, slot) in self.marked.iter_mut().enumerate().take(64) {
                if bits & (1 << i) == 0 {
                    continue;
                }
                if let Some(keys) = slot {
                    if keys.len() < self.limit {
                        keys.push((row.run_id().to_owned(), row.seq()));
                    } else {
                        *slot = None;
                    }
                }
            }
        }
    }
}

/// Which of `marks` each row matches (bit `i` for mark `i`), computed in parallel.
fn match_rows<R: EntryRow>(marks: &[(Vec<String>, Finder<'static>)], rows: &[R]) -> Vec<u64> {
    if marks.is_empty() {
        return vec![0; rows.len()];
    }
    // Each kind the marks name, with the marks naming it: one lookup per row.
    let mut by_kind: Vec<(&str, u64)> = Vec::new();
    for (i, (kinds, _)) in marks.iter().enumerate().take(64) {
        for kind in kinds {
            match by_kind.iter_mut().find(|(name, _)| name == kind) {
                Some((_, candidates)) => *candidates |= 1 << i,
                None => by_kind.push((kind, 1 << i)),
            }
        }
    }
    rows.par_iter()
        .map(|row| {
            let Some(&(_, mut candidates)) = by_kind.iter().find(|(kind, _)| *kind == row.kind())
            else {
                return 0;
            };
            let mut bits = 0u64;
            while candidates != 0 {
                let i = candidates.trailing_zeros() as usize;
                candidates &= candidates - 1;
                if marks[i].1.find(row.bytes()).is_some() {
                    bits |= 1 << i;
                }
            }
            bits
        })
        .collect()
}

/// `verify_batch`, and with a scan, its marks matched in parallel with it and the batch's
/// referenced digests kept there rather than returned.
pub fn verify_and_scan<R: EntryRow>(
    ledger_id: &str,
    carry: Option<&Carry>,
    rows: &[R],
    scan: Option<&mut JournalScan>,
) -> BatchReport {
    match scan {
        None => verify_batch(ledger_id, carry, rows),
        Some(scan) => {
            let JournalScan {
                marks, referenced, ..
            } = scan;
            let (report, bits) = rayon::join(
                || verify_batch_into(ledger_id, carry, rows, referenced),
                || match_rows(marks, rows),
            );
            scan.record(rows, &bits);
            report
        }
    }
}
