//! The one error type of the core. Each variant maps to exactly one Python exception.

use std::fmt;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Error {
    /// A value or a JSON text that has no RFC 8785 canonical form.
    /// `position` is a byte offset into the input text when there is one.
    Canonicalization {
        message: String,
        position: Option<usize>,
    },
    /// Arguments that make no sense (an unknown hash name, an index out of range...).
    InvalidArgument(String),
    /// The stored log is not what it must be (a tile cut short, a hash missing): the
    /// file was damaged, not the call.
    LogDamaged(String),
}

pub type Result<T> = std::result::Result<T, Error>;

impl Error {
    pub fn canonical(message: impl Into<String>) -> Self {
        Error::Canonicalization {
            message: message.into(),
            position: None,
        }
    }

    pub fn canonical_at(message: impl Into<String>, position: usize) -> Self {
        Error::Canonicalization {
            message: message.into(),
            position: Some(position),
        }
    }

    pub fn invalid(message: impl Into<String>) -> Self {
        Error::InvalidArgument(message.into())
    }

    pub fn log_damaged(message: impl Into<String>) -> Self {
        Error::LogDamaged(message.into())
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::Canonicalization {
                message,
                position: Some(p),
            } => write!(f, "{message} (at byte {p})"),
            Error::Canonicalization {
                message,
                position: None,
            } => f.write_str(message),
            Error::InvalidArgument(message) | Error::LogDamaged(message) => f.write_str(message),
        }
    }
}

impl std::error::Error for Error {}
