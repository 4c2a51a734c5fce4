//! The content names stored bytes hold (`cas.names_in`): a receipt, a report or a manifest
//! names the blobs it covers, and garbage collection keeps what is named. Found as Python's
//! `re.findall(rb"(?:blake3|sha256):[0-9a-f]{64}", data)` finds them (`cas.names_in_reference`,
//! held to this by the tests): leftmost first, never overlapping, with no boundary asked
//! on either side. A scan of a ledger's blobs spent most of `gc`'s time in that regex.

use memchr::memmem::Finder;

use super::{BLAKE3_PREFIX, SHA256_PREFIX};

/// A name's length: a 7-byte prefix and 64 hex digits.
const NAME_LEN: usize = 71;
const PREFIX_LEN: usize = 7;

/// Every content name in `data`, in the order found.
pub fn content_names_in(data: &[u8]) -> Vec<&[u8]> {
    let finders = [
        Finder::new(BLAKE3_PREFIX.as_bytes()),
        Finder::new(SHA256_PREFIX.as_bytes()),
    ];
    let find = |which: usize, from: usize| finders[which].find(&data[from..]).map(|i| i + from);
    // Where each prefix next occurs at or after `at` (None: nowhere).
    let mut next = [find(0, 0), find(1, 0)];
    let mut found = Vec::new();
    let mut at = 0;
    loop {
        for (which, place) in next.iter_mut().enumerate() {
            if matches!(place, Some(p) if *p < at) {
                *place = find(which, at);
            }
        }
        let Some(start) = next.iter().flatten().copied().min() else {
            return found;
        };
        let name = data.get(start..start + NAME_LEN);
        match name {
            Some(name)
                if name[PREFIX_LEN..]
                    .iter()
                    .all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) =>
            {
                found.push(name);
                at = start + NAME_LEN;
            }
            _ => at = start + 1,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(data: &str) -> Vec<&str> {
        content_names_in(data.as_bytes())
            .into_iter()
            .map(|n| std::str::from_utf8(n).unwrap())
            .collect()
    }

    #[test]
    fn names_are_found_leftmost_and_never_overlapping() {
        let hex = "0123456789abcdef".repeat(4);
        let b = format!("blake3:{hex}");
        let s = format!("sha256:{hex}");
        assert_eq!(names(&format!("x{b}y {s}")), [b.as_str(), s.as_str()]);
        // A name inside the digits of another is not found: the first one took them.
        let inner = format!("blake3:{}sha256:{}", &hex[..57], hex);
        assert_eq!(names(&inner), [format!("sha256:{hex}").as_str()]);
        assert_eq!(names(&format!("{b}{b}")), [b.as_str(), b.as_str()]);
        // 65 digits: the first 64 are a name.
        assert_eq!(names(&format!("{b}0")), [b.as_str()]);
    }

    #[test]
    fn near_misses_are_not_names() {
        let hex = "0123456789abcdef".repeat(4);
        assert!(names(&format!("blake3:{}", &hex[..63])).is_empty());
        assert!(names(&format!("blake3:{}", hex.to_uppercase())).is_empty());
        assert!(names(&format!("Blake3:{hex} sha256 :{hex} sha512:{hex}")).is_empty());
        assert!(names("").is_empty() && names("blake3:").is_empty());
        // A prefix that fails leaves the next one to be found.
        assert_eq!(names(&format!("sha256:sha256:{hex}")).len(), 1);
    }
}
