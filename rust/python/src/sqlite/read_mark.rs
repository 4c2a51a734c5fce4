//! What proves that a connection opened later reads the very snapshot a caller's
//! transaction reads: the caller's *mark*, taken as that transaction began, still the same.
//!
//! A mark holds, for the caller's main database:
//! - in WAL mode, the WAL-index header: the 48 bytes at the start of the `-shm` that
//!   SQLite copies when a read transaction begins and rewrites at every commit (the last
//!   valid frame, its checksum, the salts, a counter each commit increments). While it
//!   stays the same no commit has happened, so a transaction begun meanwhile reads the
//!   caller's snapshot. It is read where SQLite reads it, in the connection's own mapping
//!   (the VFS's `xShmMap`): never through a descriptor of ours, whose closing would drop
//!   the locks SQLite holds on that file in this process (POSIX locks are the process's).
//!   In rollback-journal mode nothing is needed there: the caller's shared lock keeps
//!   every writer from committing until its transaction ends.
//! - the caller's own changes (`sqlite3_total_changes64`) and schema cookie
//!   (`PRAGMA schema_version`): rows or schema a write transaction changed and has not
//!   committed, which no other connection sees.
//!
//! Row counts and the log's size, compared instead, would miss a commit that rewrites a
//! row in place. What no mark can see is a writer that ignores SQLite's locks (one that
//! writes the file's bytes, or replaces its `-shm`, while it is in use): against that no
//! SQLite reader is consistent, one connection or many.

use std::ffi::c_void;
use std::ptr;

use libsqlite3_sys as ffi;

use super::Connection;

/// The two copies of the WAL-index header at the start of the `-shm`.
const HEADER: usize = 48;
/// `isInit`, set once SQLite has written the header.
const IS_INIT: usize = 12;
/// The size of the `-shm`'s regions, as SQLite maps them (`WALINDEX_PGSZ`).
const REGION: i32 = 32768;

/// The WAL-index header now, as the connection's SQLite maps it (`None`: the connection
/// has no `-shm` mapped, or the header is being rewritten or was never written). Call it
/// only for a connection in WAL mode: in another mode, asking for the mapping would open
/// a `-shm`.
pub(crate) fn wal_header(connection: Connection) -> Option<[u8; HEADER]> {
    let mut file: *mut ffi::sqlite3_file = ptr::null_mut();
    // SAFETY: a live connection held by this thread; SQLITE_FCNTL_FILE_POINTER writes the
    // main database's `sqlite3_file`, owned by SQLite and open as long as the connection.
    let found = unsafe {
        ffi::sqlite3_file_control(
            connection.handle(),
            c"main".as_ptr(),
            ffi::SQLITE_FCNTL_FILE_POINTER,
            ptr::from_mut(&mut file).cast(),
        )
    };
    if found != ffi::SQLITE_OK || file.is_null() {
        return None;
    }
    // SAFETY: `file` is SQLite's open file; its methods table is static. `xShmMap` with
    // `bExtend` 0 gives the first region as the connection maps it (what SQLite does
    // itself before a read), and the region stays mapped while the connection is open.
    // The bytes are shared with other processes that write them: read as volatile, and
    // trusted only when both copies agree (a writer rewrites the second, then the first).
    unsafe {
        let methods = (*file).pMethods;
        if methods.is_null() || (*methods).iVersion < 2 {
            return None;
        }
        let map = (*methods).xShmMap?;
        let mut region: *mut c_void = ptr::null_mut();
        if map(file, 0, REGION, 0, &mut region) != ffi::SQLITE_OK || region.is_null() {
            return None;
        }
        if let Some(barrier) = (*methods).xShmBarrier {
            barrier(file);
        }
        let bytes = region.cast::<u8>().cast_const();
        let mut copies = [0u8; 2 * HEADER];
        for (at, byte) in copies.iter_mut().enumerate() {
            *byte = ptr::read_volatile(bytes.add(at));
        }
        let (first, second) = copies.split_at(HEADER);
        if first != second || first[IS_INIT] != 1 {
            return None;
        }
        first.try_into().ok()
    }
}

/// The mark of `connection`'s current transaction now (`None` outside a transaction, for
/// a file opened `immutable`, which has no `-shm` to read, or in WAL mode when the `-shm`
/// cannot be read).
pub(crate) fn mark_now(connection: Connection) -> Option<Vec<u8>> {
    if connection.in_autocommit() || connection.immutable() {
        return None;
    }
    // A read of the database: inside a transaction yet to read, its snapshot begins here.
    let schema = connection.pragma_int("schema_version")?;
    if connection.transaction_state() == ffi::SQLITE_TXN_NONE {
        return None;
    }
    let mode = connection.pragma_text("journal_mode")?;
    let mut mark = Vec::with_capacity(1 + 16 + HEADER);
    mark.push(u8::from(mode.eq_ignore_ascii_case(b"wal")));
    mark.extend_from_slice(&schema.to_le_bytes());
    // SAFETY: a live connection.
    let changes = unsafe { ffi::sqlite3_total_changes64(connection.handle()) };
    mark.extend_from_slice(&changes.to_le_bytes());
    if mark[0] == 1 {
        mark.extend_from_slice(&wal_header(connection)?);
    }
    Some(mark)
}

/// The mark of the transaction `connection` has begun, given the WAL-index header read
/// just before it began (`before`): in a read transaction of a WAL
/// database the header must not have moved across that first read, or the snapshot could
/// be either side of a commit. A write transaction holds the write lock (no other commit
/// can happen) and a rollback-journal one a shared lock: for them `before` is not needed.
pub(crate) fn mark_begun(connection: Connection, before: Option<&[u8]>) -> Option<Vec<u8>> {
    let mark = mark_now(connection)?;
    let wal = mark[0] == 1;
    if wal && connection.transaction_state() == ffi::SQLITE_TXN_READ {
        let header = &mark[1 + 16..];
        if before != Some(header) {
            return None;
        }
    }
    Some(mark)
}

/// The schema cookie a mark was taken with (a reader's first read must see it).
pub(crate) fn schema_of(mark: &[u8]) -> Option<i64> {
    Some(i64::from_le_bytes(mark.get(1..9)?.try_into().ok()?))
}

impl Connection {
    /// Whether no transaction is open (each statement its own).
    fn in_autocommit(&self) -> bool {
        // SAFETY: a live connection.
        unsafe { ffi::sqlite3_get_autocommit(self.0) != 0 }
    }

    /// `SQLITE_TXN_NONE`, `_READ` or `_WRITE`: the main database's transaction.
    pub(crate) fn transaction_state(&self) -> i32 {
        // SAFETY: a live connection and a NUL-terminated schema name.
        unsafe { ffi::sqlite3_txn_state(self.0, c"main".as_ptr()) }
    }

    fn pragma_text(&self, name: &str) -> Option<Vec<u8>> {
        let mut statement = self.prepare(&format!("PRAGMA {name}")).ok()?;
        statement.start(&[]).ok()?;
        statement.step().ok()?.then(|| statement.bytes(0).to_vec())
    }

    pub(crate) fn pragma_int(&self, name: &str) -> Option<i64> {
        let mut statement = self.prepare(&format!("PRAGMA {name}")).ok()?;
        statement.start(&[]).ok()?;
        statement.step().ok()?.then(|| statement.int(0))
    }
}
