//! The blob pass straight from SQLite: every chunk of every blob streamed through the open
//! apsw connection and re-hashed, with the GIL released (taken back now and then for Ctrl-C).

use agentledger_core::blob_check::{BlobCheck, BlobFinding};
use pyo3::prelude::*;

use crate::sqlite::{ApswConnection, Param, Reading};

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(verify_blobs, m)?)?;
    Ok(())
}

type FindingTuple = (String, &'static str, String, String);

/// Check the blobs `sql` yields on `connection`, once per parameter list
/// in `queries`: rows `(digest, size, chunk_size, idx, data)`, each blob's chunks together
/// in index order, `idx` NULL for a blob without chunks. Returns `(blobs checked,
/// findings)`, a finding being `(digest, check, expected, actual)`.
#[pyfunction]
fn verify_blobs(
    py: Python<'_>,
    connection: ApswConnection<'_>,
    sql: &str,
    queries: Vec<Vec<Param>>,
) -> PyResult<(u64, Vec<FindingTuple>)> {
    let mut statement = connection.connection().prepare(sql)?;
    let connection = connection.release();
    py.allow_threads(move || {
        let mut findings = Vec::new();
        let mut checked = 0u64;
        let mut finish = |blob: BlobCheck| {
            checked += 1;
            findings.extend(blob.finish().into_iter().map(
                |BlobFinding {
                     digest,
                     check,
                     expected,
                     actual,
                 }| (digest, check, expected, actual),
            ));
        };
        for params in queries {
            statement.start(&params).map_err(PyErr::from)?;
            // The blob being read, and its name's stored bytes (what rows are grouped by).
            let mut current: Option<(BlobCheck, Vec<u8>)> = None;
            let mut reading = Reading::new(connection);
            while statement.step().map_err(PyErr::from)? {
                let digest = statement.bytes_held(reading.held(), 0);
                if current.as_ref().is_none_or(|(_, name)| name != digest) {
                    if let Some((done, _)) = current.take() {
                        finish(done);
                    }
                    let name = String::from_utf8_lossy(digest).into_owned();
                    let blob = BlobCheck::new(name, statement.int(1), statement.int(2));
                    current = Some((blob, digest.to_vec()));
                }
                if !statement.is_null(3) {
                    let data = statement.bytes_held(reading.held(), 4);
                    let read = data.len();
                    current
                        .as_mut()
                        .expect("set above")
                        .0
                        .add(statement.int(3), data);
                    reading.count(read)?;
                }
            }
            drop(reading);
            if let Some((done, _)) = current.take() {
                finish(done);
            }
        }
        Ok::<_, PyErr>((checked, findings))
    })
}
