//! RFC 8785 (JCS) canonical JSON.
//!
//! - [`parse`]: a strict RFC 8259 parser (I-JSON refusals included) into a [`Value`].
//! - [`write_canonical`] / [`to_canonical`]: the canonical bytes of a [`Value`].
//! - [`canonicalize_json`] / [`is_canonical`]: both at once, on a JSON text.
//! - [`write_number`]: ECMAScript `Number.prototype.toString`, the JCS number form.
//!
//! Canonical bytes are what the ledger hashes and signs, so every path here either
//! produces exactly RFC 8785's output or refuses with [`crate::Error::Canonicalization`].

mod check;
mod number;
mod parse;
pub(crate) mod raw;
mod scan;
pub use scan::{skip_plain, skip_printable_ascii};
mod serialize;
mod value;

#[cfg(test)]
mod es6_numbers_tests;
#[cfg(test)]
mod tests;

pub(crate) use check::{certainly_canonical_members, TopMembers};
pub(crate) use number::write_integer;
pub use number::write_number;
pub use parse::parse;
pub use serialize::{compare_keys_utf16, to_canonical, write_canonical, write_string};
pub use value::Value;

use crate::error::Result;

/// The deepest nesting of arrays and objects accepted, counted as the number of
/// containers enclosing the innermost value: `[]` and `{}` have depth 1, `[[]]` depth 2,
/// a bare scalar depth 0. Texts and values nested deeper are refused, which bounds the
/// recursion of the parser and serializer (no stack overflow on hostile input) and stops
/// self-referencing Python containers.
pub const MAX_DEPTH: usize = 128;

/// Parse a JSON text and return its RFC 8785 canonical bytes.
pub fn canonicalize_json(text: &[u8]) -> Result<Vec<u8>> {
    let value = parse(text)?;
    let mut out = Vec::with_capacity(text.len());
    write_canonical(&value, &mut out)?;
    Ok(out)
}

/// Whether `text` is a JSON text already in RFC 8785 canonical form (byte for byte).
/// Invalid JSON is an error, not `false`.
pub fn is_canonical(text: &[u8]) -> Result<bool> {
    // One pass over the bytes settles the common case (verifying stored canonical
    // texts); anything else takes the full parse, which also produces the errors.
    if check::certainly_canonical(text) {
        return Ok(true);
    }
    let value = parse(text)?;
    // Canonical text has no whitespace, so its first and last bytes are the value's.
    if let (Some(first), Some(last)) = (text.first(), text.last()) {
        if first.is_ascii_whitespace() || last.is_ascii_whitespace() {
            return Ok(false);
        }
    }
    let mut out = Vec::with_capacity(text.len());
    write_canonical(&value, &mut out)?;
    Ok(out == text)
}
