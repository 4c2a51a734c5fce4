//! The records bernstein's checkpoint checks count (`checkpoints.canonical_records`, the
//! reference in Python): the lines of a segment, split on `\n`, that `json.loads` reads as
//! an object with an `hmac` member and that are byte for byte its `json.dumps(v,
//! sort_keys=True)`. A checkpoint pins the chain's first record and how many there are;
//! without the audit key nothing else says so, and Python took seconds to count them.
//!
//! `json.dumps` writes ASCII only, so a line holding any other byte, or a NUL (which it
//! would have escaped), is no record whatever it decodes to. Python's scanner and encoder
//! recurse, and raise past a depth that depends on the interpreter's own stack: a line
//! nested near that limit gets no answer here ([`canonical_records`] is `None`), and the
//! caller asks the reference.

use std::ops::Range;

use rayon::prelude::*;

use super::dumps_spaced;
use crate::pyjson::{depth, parse_wtf8, SURE_DEPTH};

/// How many records a segment holds, and where the first one is.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counted {
    pub records: u64,
    /// The first record's line, as a range of the segment's bytes.
    pub first: Option<Range<usize>>,
}

/// The records of `segment`; `None` when a line is nested too deeply to say what Python
/// would (see the module docs). Lines are checked in parallel on the current rayon pool.
pub fn canonical_records(segment: &[u8]) -> Option<Counted> {
    let mut lines = Vec::new();
    let mut start = 0;
    for line in segment.split(|&b| b == b'\n') {
        if !line.is_empty() {
            lines.push(start..start + line.len());
        }
        start += line.len() + 1;
    }
    let verdicts: Option<Vec<bool>> = lines
        .par_iter()
        .map(|range| is_record(&segment[range.clone()]))
        .collect();
    let verdicts = verdicts?;
    let mut records = lines.into_iter().zip(verdicts).filter(|(_, is)| *is);
    let first = records.next().map(|(range, _)| range);
    let records = first.iter().count() as u64 + records.count() as u64;
    Some(Counted { records, first })
}

/// Whether `line` is a record; `None` when Python's answer would hang on its stack.
fn is_record(line: &[u8]) -> Option<bool> {
    if !line.is_ascii() || line.contains(&0) {
        return Some(false);
    }
    let value = match parse_wtf8(line) {
        Ok(parsed) => parsed.value,
        Err(error) if error.to_string().contains("maximum recursion depth") => return None,
        Err(_) => return Some(false),
    };
    if depth(&value) > SURE_DEPTH {
        return None;
    }
    // Not an object, or one without an `hmac` (`get` answers only for objects).
    if value.get("hmac").is_none() {
        return Some(false);
    }
    let mut dumped = Vec::with_capacity(line.len());
    dumps_spaced(&value, None, &mut dumped)?;
    Some(dumped == line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn count(segment: &str) -> Option<(u64, Option<&str>)> {
        let counted = canonical_records(segment.as_bytes())?;
        Some((counted.records, counted.first.map(|r| &segment[r])))
    }

    #[test]
    fn records_are_canonical_objects_with_an_hmac() {
        let segment = concat!(
            "{\"a\": 1}\n",                              // no hmac
            "{\"hmac\":\"x\"}\n",                        // compact separators
            "\n",                                        // blank
            "{\"b\": [1, 2.5, NaN], \"hmac\": \"y\"}\n", // a record
            "{\"hmac\": \"y\", \"b\": 1}\n",             // keys out of order
            "{\"hmac\": \"\\u00e9\"}\n",                 // a record (escaped)
            "{\"hmac\": \"\u{e9}\"}\n",                  // not ASCII
            "[{\"hmac\": 1}]\n",                         // not an object
            "{\"hmac\": 1, \"hmac\": 1}",                // a repeated key
        );
        assert_eq!(
            count(segment),
            Some((2, Some("{\"b\": [1, 2.5, NaN], \"hmac\": \"y\"}")))
        );
        assert_eq!(count(""), Some((0, None)));
    }

    #[test]
    fn deep_nesting_gets_no_answer() {
        let deep = |n: usize| format!("{{\"hmac\": {}0{}}}", "[".repeat(n), "]".repeat(n));
        assert_eq!(count(&deep(SURE_DEPTH - 1)).map(|c| c.0), Some(1));
        assert_eq!(count(&deep(SURE_DEPTH)), None);
        assert_eq!(count(&deep(5_000)), None);
    }
}
