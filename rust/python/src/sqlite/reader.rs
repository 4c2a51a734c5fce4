//! Read-only connections of our own beside a caller's connection, so that a pool's threads
//! read the ledger in parallel instead of taking turns on the caller's one connection.
//!
//! A reader opens the very file the caller's connection reads (the default VFS only; the
//! `immutable` flag and `mmap_size` copied) and begins a read transaction. It is kept only
//! if it provably reads the caller's snapshot: the caller's mark (`read_mark.rs`), taken
//! as its transaction began, is the same before the readers begin and after, and each
//! reader sees the mark's schema cookie. (The host SQLite is built without
//! `SQLITE_ENABLE_SNAPSHOT`, so a snapshot cannot be handed over.) A file opened
//! `immutable` has no locks and no `-shm`, so nothing can be proven: it is declared never
//! to change, and its readers are only compared with the caller on the log (size and
//! root) and the row counts and highest row ids of the tables they read. Whatever cannot
//! be set up this way is `None`: the caller reads through its own connection, as before.

use std::ffi::{c_int, CStr, CString};
use std::ptr;

use libsqlite3_sys as ffi;

use super::read_mark::{mark_now, schema_of};
use super::{Connection, Statement};
use crate::errors::Error;

/// What a reader of an `immutable` file must see as the caller does: the log (size and
/// root) and the tables a bernstein verify reads, by count and highest row id.
const STATE_SQL: &str = "SELECT (SELECT size FROM log_state), (SELECT frontier FROM log_state), \
     (SELECT count(*) FROM blobs), (SELECT max(rowid) FROM blobs), \
     (SELECT count(*) FROM blob_chunks), (SELECT max(rowid) FROM blob_chunks), \
     (SELECT count(*) FROM bernstein_files), (SELECT max(rowid) FROM bernstein_files)";

/// A connection this module opened, closed when dropped (its statements must be dropped
/// first: a struct holding both declares them before it).
pub struct OwnedConnection(Connection);

// SAFETY: opened with SQLITE_OPEN_NOMUTEX; its user (a `Mutex` around it and its
// statements) lets one thread at a time use it.
unsafe impl Send for OwnedConnection {}

impl OwnedConnection {
    pub fn connection(&self) -> Connection {
        self.0
    }
}

impl Drop for OwnedConnection {
    fn drop(&mut self) {
        // SAFETY: opened by `open_reader`, closed once; its statements are finalized (the
        // read transaction is ended by the close).
        unsafe {
            ffi::sqlite3_close(self.0 .0);
        }
    }
}

/// The state a reader is compared on: the row of [`STATE_SQL`], as text.
fn state(connection: Connection) -> Result<Vec<Vec<u8>>, Error> {
    let mut statement = connection.prepare(STATE_SQL)?;
    statement.start(&[])?;
    if !statement.step()? {
        return Err(Error::Sqlite {
            code: ffi::SQLITE_ERROR,
            message: "no state row".into(),
        });
    }
    Ok((0..8)
        .map(|column| {
            let mut value = vec![u8::from(statement.is_null(column))];
            value.extend_from_slice(statement.bytes(column));
            value
        })
        .collect())
}

fn execute(connection: Connection, sql: &str) -> Result<(), Error> {
    let mut statement: Statement = connection.prepare(sql)?;
    statement.start(&[])?;
    while statement.step()? {}
    Ok(())
}

/// The file name as a URI that opens it `immutable`.
fn immutable_uri(path: &[u8]) -> Vec<u8> {
    let mut uri = b"file:".to_vec();
    for &byte in path {
        match byte {
            b'%' | b'?' | b'#' => uri.extend_from_slice(format!("%{byte:02X}").as_bytes()),
            _ => uri.push(byte),
        }
    }
    uri.extend_from_slice(b"?immutable=1");
    uri
}

impl Connection {
    /// The main database's file name as SQLite resolved it (`None`: in memory or
    /// temporary).
    pub(crate) fn main_path(&self) -> Option<Vec<u8>> {
        // SAFETY: a live connection; the name stays valid while it is open, and is copied.
        let path = unsafe {
            let name = ffi::sqlite3_db_filename(self.0, c"main".as_ptr());
            (!name.is_null()).then(|| CStr::from_ptr(name).to_bytes().to_vec())
        }?;
        (!path.is_empty()).then_some(path)
    }

    /// Whether the main database was opened `immutable` (no locks, no `-shm`).
    pub(crate) fn immutable(&self) -> bool {
        // SAFETY: the file name SQLite gave, valid while the connection is open; the URI
        // parameters after it are read by `sqlite3_uri_boolean`, as SQLite documents.
        unsafe {
            let filename = ffi::sqlite3_db_filename(self.0, c"main".as_ptr());
            !filename.is_null() && ffi::sqlite3_uri_boolean(filename, c"immutable".as_ptr(), 0) != 0
        }
    }

    /// `count` readers of the file this connection reads, each in a read transaction that
    /// reads what this connection's current transaction reads (see the module): `mark` is
    /// the mark that transaction was begun with (`read_mark.rs`); `None` when that cannot
    /// be had. The caller holds this connection (its mutex), inside that transaction.
    pub fn open_readers(&self, count: usize, mark: Option<&[u8]>) -> Option<Vec<OwnedConnection>> {
        // SAFETY: a live connection held by this thread.
        let (in_transaction, default_vfs) = unsafe {
            let mut vfs: *mut ffi::sqlite3_vfs = ptr::null_mut();
            let found = ffi::sqlite3_file_control(
                self.0,
                c"main".as_ptr(),
                ffi::SQLITE_FCNTL_VFS_POINTER,
                ptr::from_mut(&mut vfs).cast(),
            );
            let default = ffi::sqlite3_vfs_find(ptr::null());
            (
                ffi::sqlite3_get_autocommit(self.0) == 0,
                found == ffi::SQLITE_OK && !vfs.is_null() && vfs == default,
            )
        };
        let path = self.main_path()?; // None: in memory, or a temporary file
        if !in_transaction || !default_vfs {
            return None;
        }
        let immutable = self.immutable();
        let expected = match immutable {
            true => Expected::State(state(*self).ok()?),
            false => {
                let mark = mark?;
                if mark_now(*self).as_deref() != Some(mark) {
                    return None; // a commit since the caller began, or its own changes
                }
                Expected::Schema(schema_of(mark)?)
            }
        };
        let mmap = self.pragma_int("mmap_size")?;
        let (name, uri_flag) = if immutable {
            (immutable_uri(&path), ffi::SQLITE_OPEN_URI)
        } else {
            (path, 0)
        };
        let name = CString::new(name).ok()?;
        let mut readers = Vec::with_capacity(count);
        for _ in 0..count {
            let reader = open_one(&name, uri_flag, mmap)?;
            // The reader's first read: its snapshot is taken here.
            let sees = match &expected {
                Expected::State(caller) => state(reader.connection()).ok()? == *caller,
                Expected::Schema(cookie) => {
                    reader.connection().pragma_int("schema_version")? == *cookie
                }
            };
            if !sees {
                return None;
            }
            readers.push(reader);
        }
        // Every reader began while the mark held: no commit came between.
        if !immutable && mark_now(*self).as_deref() != mark {
            return None;
        }
        Some(readers)
    }
}

/// What each reader's first read must find.
enum Expected {
    /// The caller's [`STATE_SQL`] row (an `immutable` file).
    State(Vec<Vec<u8>>),
    /// The schema cookie of the caller's mark.
    Schema(i64),
}

/// One reader, in a read transaction (begun by the caller's first read).
fn open_one(name: &CStr, uri_flag: c_int, mmap: i64) -> Option<OwnedConnection> {
    let mut raw: *mut ffi::sqlite3 = ptr::null_mut();
    let flags = ffi::SQLITE_OPEN_READONLY | ffi::SQLITE_OPEN_NOMUTEX | uri_flag;
    // SAFETY: a NUL-terminated name; `raw` receives a handle (even on failure, when it
    // must still be closed).
    let code = unsafe { ffi::sqlite3_open_v2(name.as_ptr(), &mut raw, flags, ptr::null()) };
    if raw.is_null() {
        return None;
    }
    let reader = OwnedConnection(Connection(raw));
    if code != ffi::SQLITE_OK {
        return None;
    }
    // SAFETY: a live connection of ours. No SQL of the file may change its schema or reach
    // outside it; a plan never depends on a bound value (else SQLite's build, with STAT4,
    // re-prepared every store read at each new key: a tenth of a bernstein verify's CPU);
    // a writer busy checkpointing is waited for a while.
    unsafe {
        ffi::sqlite3_db_config(
            raw,
            ffi::SQLITE_DBCONFIG_DEFENSIVE,
            1,
            ptr::null_mut::<c_int>(),
        );
        ffi::sqlite3_db_config(
            raw,
            ffi::SQLITE_DBCONFIG_ENABLE_QPSG,
            1,
            ptr::null_mut::<c_int>(),
        );
        ffi::sqlite3_busy_timeout(raw, 5000);
    }
    let connection = reader.connection();
    execute(connection, "PRAGMA trusted_schema = OFF").ok()?;
    execute(connection, "PRAGMA query_only = ON").ok()?;
    execute(connection, &format!("PRAGMA mmap_size = {}", mmap.max(0))).ok()?;
    execute(connection, "BEGIN DEFERRED").ok()?;
    Some(reader)
}
