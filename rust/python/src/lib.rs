//! The `agentledger._core` extension: a thin conversion layer over `agentledger-core`.
//!
//! Thread-safety: every function here either borrows its inputs for the duration of the
//! call or copies them into Rust-owned memory before releasing the GIL (`py.allow_threads`),
//! so no Python object is touched while other threads run. No Python object is held by Rust
//! after a call returns, and nothing calls back into Python per item (the journal pass calls
//! its progress callback once per batch, `StoredTree` its tile reader once per tile).
//! `sqlite` reaches apsw's own SQLite library.

use pyo3::prelude::*;

// Rust's allocations only (Python objects keep CPython's allocator); see Cargo.toml.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

mod append;
mod bernstein;
mod bernstein_audit;
mod bernstein_check;
mod bernstein_files;
mod bernstein_journals;
mod blob_pass;
mod btree_tables;
mod canonical;
mod entry;
mod errors;
mod hashing;
mod index_check;
mod interrupts;
mod journal;
mod journal_pass;
mod merkle;
mod pools;
mod pyjson;
mod rows_table;
mod sha256_blobs;
mod signature;
mod sqlite;
mod tiles;

/// `mi_option_purge_delay` in mimalloc.h (v3, the version pinned): the sys crate names
/// no constant for it.
const MI_OPTION_PURGE_DELAY: libmimalloc_sys::mi_option_t = 15;

#[pymodule]
fn _core(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // Memory freed is kept committed, not handed back to the system after a delay: a
    // verify in a process that verified before then reuses it instead of faulting in
    // (and zeroing) a hundred megabytes of fresh pages again (about 10% of a warm bulk
    // verify). The process keeps its peak size, as with glibc's heap.
    // SAFETY: sets an option of the allocator; mimalloc allows it at any time.
    unsafe { libmimalloc_sys::mi_option_set(MI_OPTION_PURGE_DELAY, -1) };
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    errors::register(m)?;
    append::register(m)?;
    bernstein::register(m)?;
    bernstein_audit::register(m)?;
    bernstein_check::register(m)?;
    bernstein_files::register(m)?;
    bernstein_journals::register(m)?;
    blob_pass::register(m)?;
    btree_tables::register(m)?;
    canonical::register(m)?;
    entry::register(m)?;
    hashing::register(m)?;
    index_check::register(m)?;
    journal::register(m)?;
    journal_pass::register(m)?;
    merkle::register(m)?;
    pyjson::register(m)?;
    signature::register(m)?;
    sqlite::register(m)?;
    tiles::register(m)?;
    Ok(())
}
