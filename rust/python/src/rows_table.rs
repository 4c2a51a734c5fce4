//! `agentledger_rows(?)`: rows held in Rust memory, read by SQL as a table-valued function,
//! so that a whole batch is written by one `INSERT ... SELECT` statement.
//!
//! One statement for the batch, rather than one per row, keeps SQLite's b-tree cursors
//! open from row to row (each row is appended next to the one before instead of searched
//! for from the root), pays for one statement journal instead of one per row or per
//! chunk, and parses no SQL per row (a multi-row `VALUES` costs ~5k instructions per row
//! to prepare). The rows are bound as a pointer (`sqlite3_bind_pointer`), which SQL text
//! cannot forge: without one bound by [`Rows`], the table is empty.
//!
//! Columns `c0`, `c1`, ... hold a row's values (NULL past its width); `rows` is the hidden
//! argument. It is an eponymous-only virtual table, registered on a connection the first
//! time a statement there needs it ([`prepare`]).

use std::ffi::{c_char, c_int, c_void, CStr};
use std::ptr;

use libsqlite3_sys as ffi;

use crate::errors::Error;
use crate::sqlite::{Connection, Statement, Value};

const NAME: &CStr = c"agentledger_rows";
/// What the bound pointer is, as `sqlite3_bind_pointer` and `sqlite3_value_pointer` name it.
const POINTER_TYPE: &CStr = c"agentledger-rows";
const SCHEMA: &CStr = c"CREATE TABLE x(c0, c1, c2, c3, c4, c5, c6, c7, rows HIDDEN)";
const MAX_WIDTH: usize = 8;
const ROWS_COLUMN: c_int = MAX_WIDTH as c_int;

/// Rows of `width` values each, one after another in `values`.
#[derive(Debug)]
pub struct Rows<'a> {
    width: usize,
    values: &'a [Value<'a>],
}

impl<'a> Rows<'a> {
    /// `values` cut into rows of `width` (1..=8) values.
    pub fn new(width: usize, values: &'a [Value<'a>]) -> Self {
        assert!(
            (1..=MAX_WIDTH).contains(&width) && values.len().is_multiple_of(width),
            "rows of 1 to {MAX_WIDTH} values"
        );
        Rows { width, values }
    }

    /// The rows as the argument of `agentledger_rows(?)`.
    pub fn as_argument(&self) -> Value<'_> {
        Value::pointer(self, POINTER_TYPE)
    }

    fn len(&self) -> usize {
        self.values.len() / self.width
    }

    fn get(&self, row: usize, column: usize) -> Option<&Value<'a>> {
        (column < self.width).then(|| &self.values[row * self.width + column])
    }
}

/// Prepare `sql`, which reads `agentledger_rows`, on `connection`: the table is registered
/// on a connection the first time it is needed there (when `sql` does not prepare).
pub fn prepare(connection: &Connection, sql: &str) -> Result<Statement, Error> {
    connection.prepare(sql).or_else(|_| {
        register(connection)?;
        connection.prepare(sql)
    })
}

fn register(connection: &Connection) -> Result<(), Error> {
    // SAFETY: a live connection; the module is static and takes no client data.
    let code = unsafe {
        ffi::sqlite3_create_module_v2(
            connection.handle(),
            NAME.as_ptr(),
            &MODULE,
            ptr::null_mut(),
            None,
        )
    };
    if code == ffi::SQLITE_OK {
        Ok(())
    } else {
        Err(connection.failure(code))
    }
}

// SAFETY (all the callbacks below): SQLite calls them only as the virtual-table protocol
// says, with the pointers it documents; the cursor and table are the ones allocated here.

const EMPTY_MODULE: ffi::sqlite3_module = unsafe { std::mem::zeroed() };

/// No `xCreate`: eponymous only. Read only: no `xUpdate`.
static MODULE: ffi::sqlite3_module = ffi::sqlite3_module {
    iVersion: 1,
    xConnect: Some(connect),
    xBestIndex: Some(best_index),
    xDisconnect: Some(disconnect),
    xOpen: Some(open),
    xClose: Some(close),
    xFilter: Some(filter),
    xNext: Some(next),
    xEof: Some(eof),
    xColumn: Some(column),
    xRowid: Some(rowid),
    ..EMPTY_MODULE
};

#[repr(C)]
struct Cursor {
    base: ffi::sqlite3_vtab_cursor,
    rows: *const Rows<'static>,
    row: usize,
}

impl Cursor {
    fn rows(&self) -> Option<&Rows<'static>> {
        // SAFETY: bound by the statement being stepped, which outlives this cursor's use.
        unsafe { self.rows.as_ref() }
    }
}

unsafe extern "C" fn connect(
    db: *mut ffi::sqlite3,
    _aux: *mut c_void,
    _argc: c_int,
    _argv: *const *const c_char,
    vtab: *mut *mut ffi::sqlite3_vtab,
    _error: *mut *mut c_char,
) -> c_int {
    // SAFETY: SQLite calls `connect` with its live connection; SCHEMA is NUL-terminated.
    let code = unsafe { ffi::sqlite3_declare_vtab(db, SCHEMA.as_ptr()) };
    if code != ffi::SQLITE_OK {
        return code;
    }
    // Never from a trigger or a view: a ledger file's own schema cannot reach it.
    // SAFETY: inside xConnect on that connection, where vtab_config is allowed.
    unsafe { ffi::sqlite3_vtab_config(db, ffi::SQLITE_VTAB_DIRECTONLY) };
    let table = Box::new(ffi::sqlite3_vtab {
        pModule: ptr::null(),
        nRef: 0,
        zErrMsg: ptr::null_mut(),
    });
    // SAFETY: `vtab` is SQLite's out-pointer for the new table; `disconnect` frees it.
    unsafe { *vtab = Box::into_raw(table) };
    ffi::SQLITE_OK
}

unsafe extern "C" fn disconnect(vtab: *mut ffi::sqlite3_vtab) -> c_int {
    // SAFETY: the table `connect` boxed; SQLite disconnects each table once.
    drop(unsafe { Box::from_raw(vtab) });
    ffi::SQLITE_OK
}

/// The only plan: `rows = ?` (the argument), used once and not re-checked by SQLite.
unsafe extern "C" fn best_index(
    _vtab: *mut ffi::sqlite3_vtab,
    info: *mut ffi::sqlite3_index_info,
) -> c_int {
    // SAFETY: SQLite passes a valid index_info, ours alone during this call.
    let info = unsafe { &mut *info };
    let count = usize::try_from(info.nConstraint).unwrap_or(0);
    for i in 0..count {
        // SAFETY: `i < nConstraint`, the length of `aConstraint`.
        let constraint = unsafe { &*info.aConstraint.add(i) };
        if constraint.iColumn == ROWS_COLUMN
            && constraint.op == ffi::SQLITE_INDEX_CONSTRAINT_EQ as u8
            && constraint.usable != 0
        {
            // SAFETY: `aConstraintUsage` has `nConstraint` entries, like `aConstraint`.
            let usage = unsafe { &mut *info.aConstraintUsage.add(i) };
            usage.argvIndex = 1;
            usage.omit = 1;
            info.estimatedCost = 1.0;
            return ffi::SQLITE_OK;
        }
    }
    ffi::SQLITE_CONSTRAINT // no plan without the argument
}

unsafe extern "C" fn open(
    _vtab: *mut ffi::sqlite3_vtab,
    cursor: *mut *mut ffi::sqlite3_vtab_cursor,
) -> c_int {
    let state = Box::new(Cursor {
        base: ffi::sqlite3_vtab_cursor {
            pVtab: ptr::null_mut(),
        },
        rows: ptr::null(),
        row: 0,
    });
    // SAFETY: SQLite's out-pointer for the cursor; `Cursor` starts with the base struct
    // (repr(C)), and `close` frees it.
    unsafe { *cursor = Box::into_raw(state).cast() };
    ffi::SQLITE_OK
}

unsafe extern "C" fn close(cursor: *mut ffi::sqlite3_vtab_cursor) -> c_int {
    // SAFETY: the cursor `open` boxed; SQLite closes each cursor once.
    drop(unsafe { Box::from_raw(cursor.cast::<Cursor>()) });
    ffi::SQLITE_OK
}

unsafe extern "C" fn filter(
    cursor: *mut ffi::sqlite3_vtab_cursor,
    _index: c_int,
    _index_text: *const c_char,
    argc: c_int,
    argv: *mut *mut ffi::sqlite3_value,
) -> c_int {
    // SAFETY: a cursor `open` made, used by SQLite from one thread at a time.
    let cursor = unsafe { &mut *cursor.cast::<Cursor>() };
    cursor.rows = if argc >= 1 {
        // SAFETY: `argc >= 1`, so `argv[0]` is a live value; a pointer of another type
        // (or none) reads as null.
        unsafe { ffi::sqlite3_value_pointer(*argv, POINTER_TYPE.as_ptr()) }
            .cast::<Rows<'static>>()
            .cast_const()
    } else {
        ptr::null()
    };
    cursor.row = 0;
    ffi::SQLITE_OK
}

unsafe extern "C" fn next(cursor: *mut ffi::sqlite3_vtab_cursor) -> c_int {
    // SAFETY: a cursor `open` made, used by SQLite from one thread at a time.
    unsafe { (*cursor.cast::<Cursor>()).row += 1 };
    ffi::SQLITE_OK
}

unsafe extern "C" fn eof(cursor: *mut ffi::sqlite3_vtab_cursor) -> c_int {
    // SAFETY: a cursor `open` made, used by SQLite from one thread at a time.
    let cursor = unsafe { &*cursor.cast::<Cursor>() };
    c_int::from(cursor.rows().is_none_or(|rows| cursor.row >= rows.len()))
}

unsafe extern "C" fn column(
    cursor: *mut ffi::sqlite3_vtab_cursor,
    context: *mut ffi::sqlite3_context,
    index: c_int,
) -> c_int {
    // SAFETY: a cursor `open` made, used by SQLite from one thread at a time.
    let cursor = unsafe { &*cursor.cast::<Cursor>() };
    let value = cursor.rows().and_then(|rows| {
        let column = usize::try_from(index).ok()?;
        rows.get(cursor.row, column)
    });
    let length = |len: usize| c_int::try_from(len).ok();
    // The values outlive the statement's step (the rows are bound to it), and SQLite
    // copies them into the record it writes: no copy here (SQLITE_STATIC).
    // SAFETY: `context` is SQLite's for this call; the pointers live as said above.
    unsafe {
        match value {
            Some(Value::Int(n)) => ffi::sqlite3_result_int64(context, *n),
            Some(Value::Real(x)) => ffi::sqlite3_result_double(context, *x),
            Some(Value::Text(text)) => match length(text.len()) {
                Some(len) => ffi::sqlite3_result_text(
                    context,
                    text.as_ptr().cast(),
                    len,
                    ffi::SQLITE_STATIC(),
                ),
                None => ffi::sqlite3_result_error_toobig(context),
            },
            Some(Value::Blob(blob)) => match length(blob.len()) {
                Some(len) => ffi::sqlite3_result_blob(
                    context,
                    blob.as_ptr().cast(),
                    len,
                    ffi::SQLITE_STATIC(),
                ),
                None => ffi::sqlite3_result_error_toobig(context),
            },
            Some(Value::Pointer { .. } | Value::Null) | None => ffi::sqlite3_result_null(context),
        }
    }
    ffi::SQLITE_OK
}

unsafe extern "C" fn rowid(cursor: *mut ffi::sqlite3_vtab_cursor, rowid: *mut i64) -> c_int {
    // SAFETY: a cursor `open` made; `rowid` is SQLite's out-pointer for this call.
    let cursor = unsafe { &*cursor.cast::<Cursor>() };
    // SAFETY: as above.
    unsafe { *rowid = i64::try_from(cursor.row).unwrap_or(i64::MAX) };
    ffi::SQLITE_OK
}
