//! What a verifier reads from a bernstein workdir: the flat content store (§4), on disk or
//! as imported into a ledger. Every verifier reads through [`Store`], so a workdir verified
//! in place and one inside a ledger are read by the same code.

use std::borrow::Cow;

use agentledger_core::hash::{hex64, sha256};

use crate::pyjson::code_points;
use crate::Crash;

/// The folder of the flat content store.
pub const CAS_DIR: &[u8] = b".sdd/cas";

/// The flat content store `.sdd/cas`, looked up the way bernstein's `ContentStore` does.
pub trait Store: Sync {
    /// Whether `.sdd/cas` exists (without it bernstein skips every byte check).
    fn exists(&self) -> bool;

    /// The bytes bernstein's `ContentStore.get(content_hash)` reads (the path is
    /// [`cas_path`] of it); `None` when there is no such file.
    fn get(&self, content_hash: &[u8]) -> Option<Cow<'_, [u8]>>;

    /// `sha256:<hex>` of the bytes [`Store::get`] would return, `None` when there are none.
    /// A ledger answers from its index of the store without reading the bytes.
    fn stored_digest<'a>(&'a self, content_hash: &'a [u8]) -> Option<Cow<'a, [u8]>>;
}

/// `CH(data)`: `sha256:` and the hex SHA-256 of the bytes, the name the store keeps
/// them under (§4).
pub fn content_hash(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(71);
    out.extend_from_slice(b"sha256:");
    out.extend_from_slice(&hex64(&sha256(data)));
    out
}

/// What bernstein's `ContentStore.get(content_hash)` raises before it reads anything (it
/// catches only `OSError`): the file name, the text after the first `:`, is encoded for
/// the file system as UTF-8 with `surrogateescape`, which refuses a lone surrogate outside
/// U+DC80..U+DCFF (`UnicodeEncodeError`), and the path may not hold a NUL (`ValueError`).
/// `None` when the lookup reads (or finds nothing). Positions count code points of the
/// name (Python's count from the start of the store's absolute path).
pub fn lookup_raises(content_hash: &[u8]) -> Option<Crash> {
    let name = match content_hash.iter().position(|&b| b == b':') {
        Some(colon) => &content_hash[colon + 1..],
        None => content_hash,
    };
    let codes: Vec<u32> = code_points(name).collect();
    let surrogate = |code: &u32| (0xD800..0xE000).contains(code);
    let escapable = |code: &u32| (0xDC80..0xDD00).contains(code);
    let mut start = 0;
    while start < codes.len() {
        if !surrogate(&codes[start]) {
            start += 1;
            continue;
        }
        let end = start + codes[start..].iter().take_while(|c| surrogate(c)).count();
        // The encoder hands each run of surrogates to the error handler, which escapes
        // up to the first one it cannot and raises for the rest of the run.
        if let Some(bad) = (start..end).find(|&at| !escapable(&codes[at])) {
            let what = if end == bad + 1 {
                format!("character '\\u{:04x}' in position {bad}", codes[bad])
            } else {
                format!("characters in position {bad}-{}", end - 1)
            };
            return Some(Crash(format!(
                "UnicodeEncodeError: 'utf-8' codec can't encode {what}: surrogates not allowed"
            )));
        }
        start = end;
    }
    name.contains(&0)
        .then(|| Crash("ValueError: embedded null byte".into()))
}

/// Where `ContentStore` looks for `content_hash`, relative to the workdir and normalised
/// (`format.cas_path`): the text after the first `:` names the file, unchecked, so
/// `sha256:../x` escapes the store as it does in bernstein. `None` when the name is empty,
/// holds a NUL, or leaves the workdir (names are WTF-8; a lone surrogate never
/// names a file bernstein could write, and is read lossily).
pub fn cas_path(content_hash: &[u8]) -> Option<String> {
    let name = match content_hash.iter().position(|&b| b == b':') {
        Some(colon) => &content_hash[colon + 1..],
        None => content_hash,
    };
    if name.is_empty() || name.contains(&0) {
        return None;
    }
    let name = String::from_utf8_lossy(name);
    let mut parts: Vec<&str> = vec![".sdd", "cas"];
    for part in name.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                parts.pop()?;
            }
            other => parts.push(other),
        }
    }
    if parts.is_empty() {
        return Some(".".to_owned());
    }
    Some(parts.join("/"))
}

#[cfg(test)]
mod tests {
    use super::{cas_path, lookup_raises};
    use crate::Crash;

    #[test]
    fn a_lookup_raises_where_python_cannot_name_the_file() {
        let raises = |name: &[u8]| lookup_raises(name).map(|Crash(text)| text);
        let null = Some("ValueError: embedded null byte".to_owned());
        assert_eq!(raises(b"sha256:ab\0cd"), null);
        assert_eq!(raises(b"ab\0cd"), null);
        assert_eq!(raises(b"a\0b:cd"), None); // only the name after the first ':'
        assert_eq!(raises(b"sha256:../x"), None);
        assert_eq!(raises(b"sha256:"), None);
        // Lone surrogates as WTF-8: surrogateescape takes U+DC80..U+DCFF only.
        let (d800, dc80, dfff) = (b"\xed\xa0\x80", b"\xed\xb2\x80", b"\xed\xbf\xbf");
        let name = |parts: &[&[u8]]| [&b"sha256:"[..], &parts.concat()].concat();
        let encode = |what: &str| {
            Some(format!(
                "UnicodeEncodeError: 'utf-8' codec can't encode {what}: surrogates not allowed"
            ))
        };
        assert_eq!(
            raises(&name(&[d800])),
            encode("character '\\ud800' in position 0")
        );
        assert_eq!(
            raises(&name(&[b"ab", d800, b"\0"])),
            encode("character '\\ud800' in position 2")
        );
        assert_eq!(
            raises(&name(&[dc80, d800])),
            encode("character '\\ud800' in position 1")
        );
        assert_eq!(
            raises(&name(&[dc80, b"x", d800, dfff])),
            encode("characters in position 2-3")
        );
        assert_eq!(raises(&name(&[b"a", dc80])), None);
    }

    #[test]
    fn cas_paths_follow_posix_normpath() {
        assert_eq!(cas_path(b"sha256:ab").as_deref(), Some(".sdd/cas/ab"));
        assert_eq!(cas_path(b"ab").as_deref(), Some(".sdd/cas/ab"));
        assert_eq!(cas_path(b"sha256:../x").as_deref(), Some(".sdd/x"));
        assert_eq!(
            cas_path(b"sha256:a/./b//c").as_deref(),
            Some(".sdd/cas/a/b/c")
        );
        assert_eq!(cas_path(b"sha256:../../../x"), None);
        assert_eq!(
            cas_path(b"sha256:/etc/passwd").as_deref(),
            Some(".sdd/cas/etc/passwd")
        );
        assert_eq!(cas_path(b"sha256:"), None);
        assert_eq!(cas_path(b"sha256:a\0b"), None);
        assert_eq!(cas_path(b"sha256:../..").as_deref(), Some("."));
        assert_eq!(cas_path(b"sha256:../../.."), None);
    }
}
