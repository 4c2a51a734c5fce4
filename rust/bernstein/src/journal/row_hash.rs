//! A row's two hashes in its journal's hash profile: `payload_hash` (the row minus its
//! envelope, `event` put back as `event_type`) and `event_hash` (over the event type, the
//! index, the payload hash and the previous event hash).

use std::io::Write as _;

use crate::pyjson::{depth, dumps_jcs, dumps_sorted, write_py_string, PyValue, PY_JSON_MAX_DEPTH};
use agentledger_core::canonical::write_string;
use agentledger_core::hash::{hex64, sha256};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Profile {
    PyJsonV1,
    JcsV2,
}

impl Profile {
    pub fn name(self) -> &'static str {
        match self {
            Profile::PyJsonV1 => "py-json-v1",
            Profile::JcsV2 => "jcs-v2",
        }
    }

    fn canon(self, value: &PyValue<'_>, out: &mut Vec<u8>) -> crate::Result<()> {
        match self {
            Profile::PyJsonV1 if depth(value) > PY_JSON_MAX_DEPTH => Err(crate::Error::Recursion),
            Profile::PyJsonV1 => dumps_sorted(value, true, out),
            Profile::JcsV2 => dumps_jcs(value, out),
        }
    }

    fn key(self, key: &[u8], out: &mut Vec<u8>) -> crate::Result<()> {
        match self {
            Profile::PyJsonV1 => write_py_string(key, true, out),
            Profile::JcsV2 => {
                write_string(to_utf8(key)?, out);
                Ok(())
            }
        }
    }
}

pub(super) fn to_utf8(s: &[u8]) -> crate::Result<&str> {
    std::str::from_utf8(s).map_err(|_| {
        crate::Error::canonical("'utf-8' codec can't encode character: surrogates not allowed")
    })
}

/// Lowercase hex SHA-256, without an allocation.
pub(super) fn hex_sha256(data: &[u8]) -> [u8; 64] {
    hex64(&sha256(data))
}

/// Whether a member is left out of the payload hash (`event` is put back as `event_type`).
pub(super) fn outside_payload(key: &[u8]) -> bool {
    // By length first: each test is then one compare of a fixed-size array.
    fn is<const N: usize>(key: &[u8], name: &[u8; N]) -> bool {
        <&[u8; N]>::try_from(key).is_ok_and(|key| key == name)
    }
    match key.len() {
        2 => is(key, b"ts"),
        5 => is(key, b"event") || is(key, b"index"),
        9 => is(key, b"elapsed_s") || is(key, b"prev_hash"),
        10 => is(key, b"event_hash"),
        12 => is(key, b"payload_hash"),
        _ => false,
    }
}

/// `payload_hash` of a row: the row minus the envelope, with `event` = `event_type`.
#[cfg(test)]
pub(super) fn payload_hash(
    row: &PyValue<'_>,
    event_type: &[u8],
    profile: Profile,
) -> crate::Result<String> {
    let PyValue::Object(members) = row else {
        return Ok(String::new());
    };
    let hash = payload_hash_in(
        members,
        event_type,
        profile,
        &mut Vec::new(),
        &mut Vec::new(),
    )?;
    Ok(String::from_utf8_lossy(&hash).into_owned())
}

/// [`payload_hash`], serializing into `out` and sorting in `order` (buffers reused from
/// row to row). `order` holds member positions; `members.len()` stands for `event`.
pub(super) fn payload_hash_in(
    members: &[(std::borrow::Cow<'_, [u8]>, PyValue<'_>)],
    event_type: &[u8],
    profile: Profile,
    out: &mut Vec<u8>,
    order: &mut Vec<usize>,
) -> crate::Result<[u8; 64]> {
    let event = PyValue::Str(event_type.into());
    let synthetic = members.len();
    let key = |at: usize| -> &[u8] {
        if at == synthetic {
            b"event"
        } else {
            &members[at].0
        }
    };
    order.clear();
    order.extend((0..members.len()).filter(|&i| !outside_payload(&members[i].0)));
    order.push(synthetic);
    match profile {
        Profile::PyJsonV1 => order.sort_unstable_by(|&a, &b| key(a).cmp(key(b))),
        Profile::JcsV2 => {
            for &at in order.iter() {
                to_utf8(key(at))?;
            }
            order.sort_unstable_by(|&a, &b| {
                agentledger_core::canonical::compare_keys_utf16(
                    std::str::from_utf8(key(a)).unwrap_or(""),
                    std::str::from_utf8(key(b)).unwrap_or(""),
                )
            });
        }
    }
    out.clear();
    out.push(b'{');
    for (i, &at) in order.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        profile.key(key(at), out)?;
        out.push(b':');
        let value = if at == synthetic {
            &event
        } else {
            &members[at].1
        };
        profile.canon(value, out)?;
    }
    out.push(b'}');
    Ok(hex_sha256(out))
}

/// What `event_hash` is computed from.
pub(super) struct EventInputs<'a> {
    pub(super) event_type: &'a [u8],
    pub(super) index: u64,
    pub(super) payload_hash: &'a [u8],
    pub(super) prev: &'a [u8],
}

impl EventInputs<'_> {
    /// `event_hash`, canonicalised in the journal's profile into `out`.
    pub(super) fn hash(&self, profile: Profile, out: &mut Vec<u8>) -> crate::Result<[u8; 64]> {
        out.clear();
        self.preimage(profile, out)?;
        Ok(hex_sha256(out))
    }

    /// What `event_hash` hashes, appended to `out`.
    pub(super) fn preimage(&self, profile: Profile, out: &mut Vec<u8>) -> crate::Result<()> {
        out.extend_from_slice(b"{\"event_type\":");
        profile.canon(&PyValue::Str(self.event_type.into()), out)?;
        out.extend_from_slice(b",\"index\":");
        let _ = write!(out, "{}", self.index);
        out.extend_from_slice(b",\"payload_hash\":\"");
        out.extend_from_slice(self.payload_hash);
        out.extend_from_slice(b"\",\"prev_hash\":");
        profile.canon(&PyValue::Str(self.prev.into()), out)?;
        out.push(b'}');
        Ok(())
    }
}
