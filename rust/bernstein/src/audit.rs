//! bernstein's HMAC audit chain (`_verify_log_bytes`): its constants, the records the
//! strict cross-check reads, and the serialization its lines are checked against. The
//! walk itself is [`walk`]; the count of records a checkpoint pins, [`records`].

use crate::pyjson::{float_repr, write_py_string, PyValue};

pub mod records;
pub mod walk;
pub use records::{canonical_records, Counted};
pub use walk::{walk, AuditWalk, Problem, Walked};

/// The head before the first record.
pub const GENESIS: &[u8; 64] = b"0000000000000000000000000000000000000000000000000000000000000000";
/// The scheme 2 HMAC prefix.
pub const SCHEME2_PREFIX: &[u8] = b"bernstein:audit:v2";
/// Events whose `prev_chain_digest` is not checked.
pub const EXEMPT_EVENTS: [&[u8]; 2] = [b"skill.catalog.install", b"skill.catalog.upgrade"];
/// The activity fields an audit record repeats in its `details`, each compared with the
/// journal row's as `str()`, in the order the strict verifier reports them. The one list:
/// `mirror.rs` compares these, and Python reads it as `_core.AUDITED_FIELDS`.
pub const AUDITED_FIELDS: [&str; 6] = [
    "stage_id",
    "kind",
    "artifact_hash",
    "evidence_set_hash",
    "terminal_state",
    "reason_code",
];
/// The `details` member naming the journal row's event hash, compared after the fields.
pub const JOURNAL_EVENT_HASH: &str = "journal_event_hash";

/// The `details` members the strict verifier compares with the journal, as `str()`:
/// [`AUDITED_FIELDS`], then [`JOURNAL_EVENT_HASH`].
pub const AUDITED: [&str; 7] = {
    let mut all = [JOURNAL_EVENT_HASH; 7];
    let mut i = 0;
    while i < AUDITED_FIELDS.len() {
        all[i] = AUDITED_FIELDS[i];
        i += 1;
    }
    all
};

/// One `activity.result` record as the cross-check reads it (`journal_index` an integer).
#[derive(Debug, Clone, PartialEq)]
pub struct ActivityRecord {
    pub segment: usize,
    pub line: u64,
    /// `str(details["run_id"])`, `None` when absent.
    pub run_id: Option<Vec<u8>>,
    /// `details["journal_index"]`, an integer (a record with anything else audits no row:
    /// see [`Walked::indexed`]).
    pub journal_index: i64,
    /// `(name, str(value))` for the [`AUDITED`] members present in `details`.
    pub fields: Vec<(&'static str, Vec<u8>)>,
}

impl ActivityRecord {
    /// `str(details.get(name, ""))` for an [`AUDITED`] member.
    pub fn field(&self, name: &str) -> &[u8] {
        self.fields
            .iter()
            .find(|(n, _)| *n == name)
            .map_or(&[], |(_, value)| value.as_slice())
    }
}

/// `json.dumps(value, sort_keys=True)`: `", "` and `": "`, ASCII, Python's float repr;
/// the top-level member `skip` left out. `None` never happens with ASCII output.
pub fn dumps_spaced(value: &PyValue<'_>, skip: Option<&[u8]>, out: &mut Vec<u8>) -> Option<()> {
    match value {
        PyValue::Null => out.extend_from_slice(b"null"),
        PyValue::Bool(true) => out.extend_from_slice(b"true"),
        PyValue::Bool(false) => out.extend_from_slice(b"false"),
        PyValue::Int(digits) => out.extend_from_slice(digits.as_bytes()),
        PyValue::Float(x) => {
            if x.is_nan() {
                out.extend_from_slice(b"NaN");
            } else if x.is_infinite() {
                out.extend_from_slice(if *x > 0.0 { b"Infinity" } else { b"-Infinity" });
            } else {
                out.extend_from_slice(float_repr(*x).as_bytes());
            }
        }
        PyValue::Str(s) => write_py_string(s, true, out).ok()?,
        PyValue::Array(items) => {
            out.push(b'[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                dumps_spaced(item, None, out)?;
            }
            out.push(b']');
        }
        PyValue::Object(members) => {
            let mut sorted: Vec<_> = members
                .iter()
                .filter(|(k, _)| Some(k.as_ref()) != skip)
                .collect();
            sorted.sort_by(|a, b| a.0.cmp(&b.0));
            out.push(b'{');
            for (i, (key, item)) in sorted.into_iter().enumerate() {
                if i > 0 {
                    out.extend_from_slice(b", ");
                }
                write_py_string(key, true, out).ok()?;
                out.extend_from_slice(b": ");
                dumps_spaced(item, None, out)?;
            }
            out.push(b'}');
        }
    }
    Some(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pyjson::parse;

    #[test]
    fn the_serialization_is_python_json_dumps_sort_keys() {
        let value = parse("{\"b\": [1, 2.5, null], \"a\": \"\\u00e9\", \"c\": {}}")
            .unwrap()
            .value;
        let mut out = Vec::new();
        dumps_spaced(&value, None, &mut out).unwrap();
        assert_eq!(
            out,
            b"{\"a\": \"\\u00e9\", \"b\": [1, 2.5, null], \"c\": {}}".to_vec()
        );
    }
}
