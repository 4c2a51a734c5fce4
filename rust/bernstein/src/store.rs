//! What a verifier reads from a bernstein workdir: the flat content store (§4), on disk or
//! as imported into a ledger. Every verifier reads through [`Store`], so a workdir verified
//! in place and one inside a ledger are read by the same code.

use std::borrow::Cow;

use agentledger_core::hash::{hex64, sha256};

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
    use super::cas_path;

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
