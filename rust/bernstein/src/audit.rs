//! bernstein's HMAC audit chain (`_verify_log_bytes`), for the chain that verifies clean.
//!
//! [`walk_clean`] settles a chain only when every line is exactly what bernstein's writer
//! produces and every check passes; it answers `None` at the first thing it is not sure
//! of (any problem at all, a duplicate key, a `scheme` that is not the integer 1 or 2, a
//! non-string `hmac`, a `journal_index` that is not an integer …), and the caller then
//! walks the chain the slow, exact way, which names the problem. So a `Some` is always
//! the verdict the exact walk gives.

use rayon::prelude::*;

use crate::pyjson::{float_repr, parse, py_str, write_py_string, PyValue};
use agentledger_core::hash::{hex64, hmac_sha256};

/// The head before the first record.
pub const GENESIS: &[u8; 64] = b"0000000000000000000000000000000000000000000000000000000000000000";
/// The scheme 2 HMAC prefix.
pub const SCHEME2_PREFIX: &[u8] = b"bernstein:audit:v2";
/// Events whose `prev_chain_digest` is not checked.
const EXEMPT_EVENTS: [&[u8]; 2] = [b"skill.catalog.install", b"skill.catalog.upgrade"];
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

/// One `activity.result` record of a clean chain.
#[derive(Debug, Clone, PartialEq)]
pub struct ActivityRecord {
    pub segment: usize,
    pub line: u64,
    /// `str(details["run_id"])`, `None` when absent.
    pub run_id: Option<Vec<u8>>,
    /// `details["journal_index"]`, an integer (anything else is not settled here).
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

/// A clean chain: its record count and its `activity.result` records, in order.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct CleanChain {
    pub records: u64,
    pub activity: Vec<ActivityRecord>,
}

/// `json.dumps(value, sort_keys=True)`: `", "` and `": "`, ASCII, Python's float repr.
fn dumps_spaced(value: &PyValue<'_>, skip: Option<&[u8]>, out: &mut Vec<u8>) -> Option<()> {
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

/// What one line contributes, when it is settled.
struct Line {
    scheme: u8,
    prev_hmac: Vec<u8>,
    hmac: Vec<u8>,
    body: Vec<u8>,
    activity: Option<ActivityRecord>,
}

fn settle_line(segment: usize, number: u64, raw: &[u8]) -> Option<Line> {
    let text = std::str::from_utf8(raw).ok()?;
    let parsed = parse(text).ok()?;
    if parsed.duplicate_keys {
        return None;
    }
    let record = parsed.value;
    if !matches!(record, PyValue::Object(_)) {
        return None;
    }
    let mut canonical = Vec::with_capacity(raw.len());
    dumps_spaced(&record, None, &mut canonical)?;
    if canonical != raw {
        return None;
    }
    let scheme = match record.get("scheme") {
        None => 1,
        Some(PyValue::Int(n)) if n == "1" => 1,
        Some(PyValue::Int(n)) if n == "2" => 2,
        _ => return None,
    };
    let hmac = record.get("hmac")?.as_str_bytes()?.to_vec();
    let prev_hmac = record.get("prev_hmac")?.as_str_bytes()?.to_vec();
    let event_type = record.get("event_type").and_then(PyValue::as_str_bytes);
    let details = match record.get("details") {
        Some(d @ PyValue::Object(_)) => Some(d),
        _ => None,
    };
    if let Some(digest) = details.and_then(|d| d.get("prev_chain_digest")) {
        let exempt = event_type.is_some_and(|e| EXEMPT_EVENTS.contains(&e));
        if let PyValue::Str(digest) = digest {
            if !digest.is_empty() && !exempt && digest.as_ref() != prev_hmac.as_slice() {
                return None;
            }
        }
    }
    let activity = if event_type == Some(b"activity.result") {
        let details = details?;
        let journal_index = match details.get("journal_index") {
            Some(PyValue::Int(n)) => n.parse::<i64>().ok()?,
            _ => return None,
        };
        Some(ActivityRecord {
            segment,
            line: number,
            run_id: details.get("run_id").map(|v| py_str(v).into_owned()),
            journal_index,
            fields: AUDITED
                .iter()
                .filter_map(|&name| details.get(name).map(|v| (name, py_str(v).into_owned())))
                .collect(),
        })
    } else {
        None
    };
    let mut body = Vec::with_capacity(raw.len());
    dumps_spaced(&record, Some(b"hmac"), &mut body)?;
    Some(Line {
        scheme,
        prev_hmac,
        hmac,
        body,
        activity,
    })
}

/// Walk the segments (in chain order) as bernstein does; `Some` only when the chain is
/// clean. `keys`: `(scheme 1 key, scheme 2 key)`; `None` checks everything but the HMACs.
/// Lines are parsed and their HMACs checked in parallel on the current rayon pool.
pub fn walk_clean(segments: &[&[u8]], keys: Option<(&[u8], &[u8])>) -> Option<CleanChain> {
    let mut lines: Vec<(usize, u64, &[u8])> = Vec::new();
    for (segment, data) in segments.iter().enumerate() {
        if !data.is_empty() && !data.ends_with(b"\n") {
            return None;
        }
        let body = data.strip_suffix(b"\n").unwrap_or(data);
        if data.is_empty() {
            continue;
        }
        for (number, line) in body.split(|&b| b == b'\n').enumerate() {
            if !line.is_empty() {
                lines.push((segment, number as u64, line));
            }
        }
    }
    let settled: Option<Vec<Line>> = lines
        .par_iter()
        .map(|&(segment, number, raw)| settle_line(segment, number, raw))
        .collect();
    let settled = settled?;
    let mut head: &[u8] = GENESIS;
    for line in &settled {
        if line.prev_hmac != head {
            return None;
        }
        head = &line.hmac;
    }
    if let Some((key1, key2)) = keys {
        let all_match = settled.par_iter().enumerate().all(|(i, line)| {
            let head: &[u8] = if i == 0 {
                GENESIS
            } else {
                &settled[i - 1].hmac
            };
            let (key, prefix) = if line.scheme == 2 {
                (key2, SCHEME2_PREFIX)
            } else {
                (key1, &b""[..])
            };
            let mut message = Vec::with_capacity(prefix.len() + head.len() + line.body.len());
            message.extend_from_slice(prefix);
            message.extend_from_slice(head);
            message.extend_from_slice(&line.body);
            hex64(&hmac_sha256(key, &message)) == line.hmac.as_slice()
        });
        if !all_match {
            return None;
        }
    }
    Some(CleanChain {
        records: settled.len() as u64,
        activity: settled.into_iter().filter_map(|l| l.activity).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(prev: &str, key: &[u8], extra: &str) -> (String, String) {
        let body = format!(
            "{{\"actor\": \"a\", \"details\": {{{extra}}}, \"event_type\": \"activity.result\", \"prev_hmac\": \"{prev}\", \"scheme\": 2}}"
        );
        let mut message = SCHEME2_PREFIX.to_vec();
        message.extend_from_slice(prev.as_bytes());
        message.extend_from_slice(body.as_bytes());
        let mac = String::from_utf8(hex64(&hmac_sha256(key, &message)).to_vec()).unwrap();
        let line = format!(
            "{{\"actor\": \"a\", \"details\": {{{extra}}}, \"event_type\": \"activity.result\", \"hmac\": \"{mac}\", \"prev_hmac\": \"{prev}\", \"scheme\": 2}}"
        );
        (line, mac)
    }

    #[test]
    fn a_clean_chain_settles_with_its_activity_records() {
        let key = b"k2";
        let genesis = std::str::from_utf8(GENESIS).unwrap();
        let (a, mac) = record(genesis, key, "\"journal_index\": 4, \"run_id\": \"r\"");
        let (b, _) = record(&mac, key, "\"journal_index\": 7, \"stage_id\": \"s\"");
        let data = format!("{a}\n{b}\n");
        let chain = walk_clean(&[data.as_bytes()], Some((b"k1", key))).unwrap();
        assert_eq!(chain.records, 2);
        assert_eq!(chain.activity[0].journal_index, 4);
        assert_eq!(chain.activity[0].run_id.as_deref(), Some(&b"r"[..]));
        assert_eq!(chain.activity[1].fields, vec![("stage_id", b"s".to_vec())]);
        // A wrong key, an edited byte, a missing newline or a broken link: not settled.
        assert!(walk_clean(&[data.as_bytes()], Some((b"k1", b"other"))).is_none());
        let edited = data.replace("\"s\"", "\"t\"");
        assert!(walk_clean(&[edited.as_bytes()], Some((b"k1", key))).is_none());
        assert!(walk_clean(&[data.trim_end().as_bytes()], None).is_none());
        let swapped = format!("{b}\n{a}\n");
        assert!(walk_clean(&[swapped.as_bytes()], None).is_none());
        // Without a key the HMACs are not checked.
        assert!(walk_clean(&[data.as_bytes()], None).is_some());
        assert_eq!(walk_clean(&[b""], None).unwrap().records, 0);
    }

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
