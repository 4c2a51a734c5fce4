//! The host's SQLite: the library apsw carries, reached through SQLite's extension API
//! rather than linked, so that Rust reads through an open apsw connection inside the same
//! transaction (and snapshot) as the Python code around it, without a Python object per row.
//!
//! apsw loads this very module once as an SQLite extension (`storage/native.py`); SQLite
//! then calls [`sqlite3_agentledger_init`] with its function table, which every call below
//! goes through. A connection enters as the `apsw.Connection` itself
//! ([`ApswConnection`]), never as an integer.

use std::ffi::{c_char, c_int, CStr, CString};
use std::ptr;
use std::sync::atomic::{AtomicBool, Ordering};

use agentledger_core::index_agreement::Cell;
use libsqlite3_sys as ffi;
use pyo3::exceptions::PyTypeError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyFloat, PyInt, PyString};

use crate::errors::Error;

mod apsw_connection;
mod read_mark;
mod reader;
mod rows;

pub use apsw_connection::ApswConnection;
pub use reader::OwnedConnection;

static BOUND: AtomicBool = AtomicBool::new(false);

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(sqlite_bound, m)?)?;
    m.add_function(wrap_pyfunction!(sqlite_readers, m)?)?;
    m.add_function(wrap_pyfunction!(sqlite_wal_header, m)?)?;
    m.add_function(wrap_pyfunction!(sqlite_read_mark, m)?)?;
    m.add_function(wrap_pyfunction!(rows::sqlite_rows, m)?)?;
    m.add_class::<rows::StatementCache>()?;
    Ok(())
}

/// The extension entry point SQLite calls when apsw loads this module: keep the function
/// table of the library that loaded us.
///
/// # Safety
/// Called by SQLite only, with a valid `sqlite3_api_routines` table.
#[no_mangle]
pub unsafe extern "C" fn sqlite3_agentledger_init(
    _db: *mut ffi::sqlite3,
    _error: *mut *mut c_char,
    api: *mut ffi::sqlite3_api_routines,
) -> c_int {
    // SAFETY: SQLite passes its own, static, complete function table.
    match unsafe { ffi::rusqlite_extension_init2(api) } {
        Ok(()) => {
            BOUND.store(true, Ordering::Release);
            ffi::SQLITE_OK
        }
        Err(_) => ffi::SQLITE_ERROR,
    }
}

/// Whether the host SQLite's function table is known (apsw loaded this module).
#[pyfunction]
fn sqlite_bound() -> bool {
    BOUND.load(Ordering::Acquire)
}

/// How many of `count` reader connections (`sqlite/reader.rs`) could be opened beside
/// `connection` in the snapshot of its current transaction, begun with `mark`
/// ([`sqlite_read_mark`]): `count`, or 0 when they were refused (no transaction or no
/// mark, another VFS, a commit since the transaction began, changes of its own).
/// What the bernstein verify's pool threads read with; the readers are closed again.
#[pyfunction]
#[pyo3(signature = (connection, count, mark=None))]
fn sqlite_readers(connection: ApswConnection<'_>, count: usize, mark: Option<Vec<u8>>) -> usize {
    connection
        .connection()
        .open_readers(count, mark.as_deref())
        .map_or(0, |readers| readers.len())
}

/// The WAL-index header of the database open on `connection`, as its SQLite maps it now
/// (`sqlite/read_mark.rs`; `None`: none mapped): read just before a read transaction
/// begins, for [`sqlite_read_mark`]. Only for a connection in WAL mode.
#[pyfunction]
fn sqlite_wal_header<'py>(
    py: Python<'py>,
    connection: ApswConnection<'py>,
) -> Option<Bound<'py, PyBytes>> {
    read_mark::wal_header(connection.connection()).map(|header| PyBytes::new(py, &header))
}

/// The mark of the transaction `connection` has just begun with its first read, given the
/// `-shm` header read just before it ([`sqlite_wal_header`]; `None` for a write
/// transaction): what proves later that readers see its snapshot (`sqlite/read_mark.rs`).
/// `None` when nothing can be proven (then no reader is opened beside it).
#[pyfunction]
#[pyo3(signature = (connection, before=None))]
fn sqlite_read_mark<'py>(
    py: Python<'py>,
    connection: ApswConnection<'py>,
    before: Option<Vec<u8>>,
) -> Option<Bound<'py, PyBytes>> {
    read_mark::mark_begun(connection.connection(), before.as_deref())
        .map(|mark| PyBytes::new(py, &mark))
}

/// An open connection owned by apsw, made only by [`ApswConnection`] (which says why
/// it may be used during the call). `Send`: SQLite serializes calls on a connection
/// (apsw's library is built THREADSAFE=1).
#[derive(Clone, Copy)]
pub struct Connection(*mut ffi::sqlite3);

// SAFETY: see the type's comment; the pointer is only ever passed back to SQLite.
unsafe impl Send for Connection {}
// SAFETY: as for `Send`: a shared `Connection` is only copied, and SQLite serializes the
// calls made with it.
unsafe impl Sync for Connection {}

impl Connection {
    pub(crate) fn handle(&self) -> *mut ffi::sqlite3 {
        self.0
    }

    pub(crate) fn failure(&self, code: c_int) -> Error {
        // SAFETY: a live connection; the message is copied before the next call.
        let message = unsafe { CStr::from_ptr(ffi::sqlite3_errmsg(self.0)) };
        Error::Sqlite {
            code,
            message: message.to_string_lossy().into_owned(),
        }
    }

    /// Hold the connection's own mutex until the guard drops. SQLite takes it on every
    /// call on the connection; a thread stepping through many rows holds it once instead,
    /// making each of those a cheap re-entry. It waits: only for a thread without the GIL.
    pub fn lock(&self) -> Held {
        // SAFETY: a live connection; its mutex is recursive (or absent: null is a no-op).
        let mutex = unsafe {
            let mutex = ffi::sqlite3_db_mutex(self.0);
            ffi::sqlite3_mutex_enter(mutex);
            mutex
        };
        Held(mutex)
    }

    /// The connection's mutex if no other thread holds it (this one may, already): what a
    /// thread holding the GIL takes instead of waiting (see `apsw_connection.rs`).
    pub fn try_lock(&self) -> Option<Held> {
        // SAFETY: a live connection; its mutex is recursive (or absent: null is a no-op,
        // and `sqlite3_mutex_try` of null answers SQLITE_OK).
        let (mutex, code) = unsafe {
            let mutex = ffi::sqlite3_db_mutex(self.0);
            (mutex, ffi::sqlite3_mutex_try(mutex))
        };
        (code == ffi::SQLITE_OK).then_some(Held(mutex))
    }

    pub fn prepare(&self, sql: &str) -> Result<Statement, Error> {
        let sql = CString::new(sql).map_err(|_| Error::Sqlite {
            code: ffi::SQLITE_MISUSE,
            message: "SQL holds a NUL byte".into(),
        })?;
        let mut raw = std::ptr::null_mut();
        // SAFETY: a live connection and a NUL-terminated statement.
        let code = unsafe {
            ffi::sqlite3_prepare_v2(self.0, sql.as_ptr(), -1, &mut raw, std::ptr::null_mut())
        };
        if code != ffi::SQLITE_OK {
            return Err(self.failure(code));
        }
        Ok(Statement {
            connection: *self,
            raw,
        })
    }
}

/// The connection's mutex, held (see [`Connection::lock`]).
pub struct Held(*mut ffi::sqlite3_mutex);

/// Bytes read between two looks at Ctrl-C by a [`Reading`].
const SIGNAL_EVERY_BYTES: usize = 64 << 20;

/// A long read on a thread without the GIL: the connection is held meanwhile (see
/// [`Connection::lock`]), and every 64 MiB it is let go while the GIL is taken back to
/// look at Ctrl-C, so that a long pass can be interrupted.
pub struct Reading {
    connection: Connection,
    held: Option<Held>,
    since_check: usize,
}

impl Reading {
    pub fn new(connection: Connection) -> Self {
        Reading {
            connection,
            held: Some(connection.lock()),
            since_check: 0,
        }
    }

    /// The connection, held by this thread.
    pub fn held(&self) -> &Held {
        self.held.as_ref().expect("held between calls to `count`")
    }

    /// Count `bytes` just read; the error of a pending signal (`KeyboardInterrupt`) once
    /// enough were.
    pub fn count(&mut self, bytes: usize) -> PyResult<()> {
        self.since_check += bytes;
        if self.since_check < SIGNAL_EVERY_BYTES {
            return Ok(());
        }
        self.since_check = 0;
        drop(self.held.take());
        Python::with_gil(|py| py.check_signals())?;
        self.held = Some(self.connection.lock());
        Ok(())
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        // SAFETY: entered by `Connection::lock` on this thread.
        unsafe { ffi::sqlite3_mutex_leave(self.0) };
    }
}

/// A bound parameter: a value apsw binds (`int`, `float`, `str`, `bytes`, `None`).
#[derive(Debug, Clone)]
pub enum Param {
    Int(i64),
    Real(f64),
    Text(String),
    Blob(Vec<u8>),
    Null,
}

impl<'py> FromPyObject<'py> for Param {
    fn extract_bound(value: &Bound<'py, PyAny>) -> PyResult<Self> {
        // `bool` is an `int`, bound as one (as apsw does); a text with a lone surrogate
        // raises `UnicodeEncodeError` (as it does there).
        if value.is_none() {
            Ok(Param::Null)
        } else if let Ok(int) = value.downcast::<PyInt>() {
            Ok(Param::Int(int.extract()?))
        } else if let Ok(real) = value.downcast::<PyFloat>() {
            Ok(Param::Real(real.value()))
        } else if let Ok(text) = value.downcast::<PyString>() {
            Ok(Param::Text(text.to_str()?.to_owned()))
        } else if let Ok(bytes) = value.downcast::<PyBytes>() {
            Ok(Param::Blob(bytes.as_bytes().to_vec()))
        } else {
            Err(PyTypeError::new_err(format!(
                "a {} cannot be bound to a statement",
                value.get_type().name()?
            )))
        }
    }
}

/// A value bound for one [`Statement::execute`], borrowed from the caller.
#[derive(Debug, Clone, Copy)]
pub enum Value<'a> {
    Int(i64),
    Real(f64),
    Text(&'a str),
    Blob(&'a [u8]),
    Null,
    /// A pointer of type `type_name`, bound with `sqlite3_bind_pointer` (which SQL text
    /// cannot forge): how `agentledger_rows(?)` gets its rows (`rows_table.rs`).
    Pointer {
        address: *const std::ffi::c_void,
        type_name: &'static CStr,
        borrowed: std::marker::PhantomData<&'a ()>,
    },
}

impl<'a> Value<'a> {
    /// `value` as a pointer of type `type_name`, borrowed for as long as the binding.
    pub fn pointer<T>(value: &'a T, type_name: &'static CStr) -> Self {
        Value::Pointer {
            address: ptr::from_ref(value).cast(),
            type_name,
            borrowed: std::marker::PhantomData,
        }
    }
}

impl<'a> From<&'a Param> for Value<'a> {
    fn from(param: &'a Param) -> Self {
        match param {
            Param::Int(n) => Value::Int(*n),
            Param::Real(x) => Value::Real(*x),
            Param::Text(text) => Value::Text(text),
            Param::Blob(blob) => Value::Blob(blob),
            Param::Null => Value::Null,
        }
    }
}

/// A prepared statement, finalized when dropped.
pub struct Statement {
    connection: Connection,
    raw: *mut ffi::sqlite3_stmt,
}

// SAFETY: as for `Connection`: used by one thread at a time, serialized by SQLite.
unsafe impl Send for Statement {}

impl Statement {
    /// Rewind and bind `params` (1-based, in order). SQLite copies them, as the rows are
    /// stepped through after this returns.
    pub fn start(&mut self, params: &[Param]) -> Result<(), Error> {
        // SAFETY: a live statement.
        unsafe {
            ffi::sqlite3_reset(self.raw);
            ffi::sqlite3_clear_bindings(self.raw);
        }
        let values: Vec<Value<'_>> = params.iter().map(Value::from).collect();
        self.bind(&values, ffi::SQLITE_TRANSIENT())
    }

    /// Reset the statement and clear its bindings (between two uses; an error of the last
    /// step is not reported again).
    pub fn rewind(&mut self) {
        // SAFETY: a live statement.
        unsafe {
            ffi::sqlite3_reset(self.raw);
            ffi::sqlite3_clear_bindings(self.raw);
        }
    }

    /// Run a statement that returns no rows once, with `values` bound (1-based, in order).
    /// SQLite reads them in place (no copy): they are unbound again before this returns.
    pub fn execute(&mut self, values: &[Value<'_>]) -> Result<(), Error> {
        let done = self
            .bind(values, ffi::SQLITE_STATIC())
            .and_then(|()| self.step().map(drop));
        // SAFETY: a live statement; the failure's message was read before the reset.
        unsafe {
            ffi::sqlite3_reset(self.raw);
            ffi::sqlite3_clear_bindings(self.raw);
        }
        done
    }

    fn bind(
        &mut self,
        values: &[Value<'_>],
        lifetime: ffi::sqlite3_destructor_type,
    ) -> Result<(), Error> {
        for (index, value) in values.iter().enumerate() {
            let at = c_int::try_from(index + 1).expect("few parameters");
            let length = |len: usize| {
                c_int::try_from(len).map_err(|_| Error::Sqlite {
                    code: ffi::SQLITE_TOOBIG,
                    message: "a value too large to bind".into(),
                })
            };
            // SAFETY: a live statement; the data outlives its binding (`lifetime` says how).
            let code = unsafe {
                match *value {
                    Value::Int(n) => ffi::sqlite3_bind_int64(self.raw, at, n),
                    Value::Real(x) => ffi::sqlite3_bind_double(self.raw, at, x),
                    Value::Null => ffi::sqlite3_bind_null(self.raw, at),
                    Value::Text(text) => ffi::sqlite3_bind_text(
                        self.raw,
                        at,
                        text.as_ptr().cast(),
                        length(text.len())?,
                        lifetime,
                    ),
                    Value::Blob(blob) => ffi::sqlite3_bind_blob(
                        self.raw,
                        at,
                        blob.as_ptr().cast(),
                        length(blob.len())?,
                        lifetime,
                    ),
                    // Always borrowed (SQLite cannot copy it): only `execute` binds one.
                    Value::Pointer {
                        address, type_name, ..
                    } => ffi::sqlite3_bind_pointer(
                        self.raw,
                        at,
                        address.cast_mut(),
                        type_name.as_ptr(),
                        None,
                    ),
                }
            };
            if code != ffi::SQLITE_OK {
                return Err(self.connection.failure(code));
            }
        }
        Ok(())
    }

    /// Advance: `true` when a row is ready, `false` when done.
    pub fn step(&mut self) -> Result<bool, Error> {
        // SAFETY: a live statement.
        match unsafe { ffi::sqlite3_step(self.raw) } {
            ffi::SQLITE_ROW => Ok(true),
            ffi::SQLITE_DONE => Ok(false),
            code => Err(self.connection.failure(code)),
        }
    }

    pub fn is_null(&self, column: c_int) -> bool {
        // SAFETY: a statement positioned on a row.
        unsafe { ffi::sqlite3_column_type(self.raw, column) == ffi::SQLITE_NULL }
    }

    pub fn int(&self, column: c_int) -> i64 {
        // SAFETY: a statement positioned on a row.
        unsafe { ffi::sqlite3_column_int64(self.raw, column) }
    }

    /// [`Statement::bytes`] on a thread that holds the connection (`held`, from
    /// [`Connection::lock`]): one call that takes the connection's mutex instead of two, for
    /// loops over millions of rows. (`sqlite3_column_value` gives an "unprotected" value,
    /// which may be read only while no other thread can use the connection: `held`.)
    pub fn bytes_held(&self, held: &Held, column: c_int) -> &[u8] {
        // SAFETY: a statement positioned on a row, its connection held by this thread; the
        // value lives until the statement moves; `value_blob` before `value_bytes`.
        unsafe {
            debug_assert_eq!(
                held.0,
                ffi::sqlite3_db_mutex(ffi::sqlite3_db_handle(self.raw))
            );
            let value = ffi::sqlite3_column_value(self.raw, column);
            let data = ffi::sqlite3_value_blob(value);
            value_bytes(data, ffi::sqlite3_value_bytes(value))
        }
    }

    /// How many columns the statement's rows have.
    pub fn columns(&self) -> usize {
        // SAFETY: a live statement.
        usize::try_from(unsafe { ffi::sqlite3_column_count(self.raw) }).unwrap_or(0)
    }

    /// The value as SQLite holds it, typed, on a thread that holds the connection (see
    /// [`Statement::bytes_held`]); text and blobs valid until the statement moves.
    pub fn cell_held(&self, held: &Held, column: c_int) -> Cell<'_> {
        // SAFETY: as for `bytes_held`; the type is read before any conversion.
        unsafe {
            debug_assert_eq!(
                held.0,
                ffi::sqlite3_db_mutex(ffi::sqlite3_db_handle(self.raw))
            );
            let value = ffi::sqlite3_column_value(self.raw, column);
            match ffi::sqlite3_value_type(value) {
                ffi::SQLITE_NULL => Cell::Null,
                ffi::SQLITE_INTEGER => Cell::Int(ffi::sqlite3_value_int64(value)),
                ffi::SQLITE_FLOAT => Cell::Real(ffi::sqlite3_value_double(value)),
                ffi::SQLITE_TEXT => {
                    let data = ffi::sqlite3_value_text(value);
                    Cell::Text(value_bytes(data.cast(), ffi::sqlite3_value_bytes(value)))
                }
                _ => {
                    let data = ffi::sqlite3_value_blob(value);
                    Cell::Blob(value_bytes(data, ffi::sqlite3_value_bytes(value)))
                }
            }
        }
    }

    /// The SQLite type code of the value (`SQLITE_INTEGER`, `SQLITE_TEXT`, ...).
    pub fn column_type(&self, column: c_int) -> c_int {
        // SAFETY: a statement positioned on a row.
        unsafe { ffi::sqlite3_column_type(self.raw, column) }
    }

    /// The value's bytes (a blob's, or a text's UTF-8), valid until the next step.
    pub fn bytes(&self, column: c_int) -> &[u8] {
        // SAFETY: a statement positioned on a row; `column_blob` before `column_bytes`, as
        // SQLite documents, and the pointer lives until the statement moves.
        unsafe {
            let data = ffi::sqlite3_column_blob(self.raw, column);
            value_bytes(data, ffi::sqlite3_column_bytes(self.raw, column))
        }
    }
}

/// The `len` bytes at `data` as SQLite gives a value's (null or empty: none).
///
/// # Safety
/// `data` is null or readable for `len` bytes for as long as the result is used.
unsafe fn value_bytes<'a>(data: *const std::ffi::c_void, len: c_int) -> &'a [u8] {
    match usize::try_from(len) {
        // SAFETY: non-null and readable for `len` bytes (the function's contract).
        Ok(len) if len > 0 && !data.is_null() => unsafe {
            std::slice::from_raw_parts(data.cast(), len)
        },
        _ => &[],
    }
}

impl Drop for Statement {
    fn drop(&mut self) {
        // SAFETY: finalized exactly once.
        unsafe {
            ffi::sqlite3_finalize(self.raw);
        }
    }
}
