//! What an import's rows of the ledger's `bernstein_files` table make: each import's
//! manifest as `importer.manifest_of` writes it (`{"files":[[path, kind, digest], …],
//! "format":"…"}`, strings as Python's `json.dumps` writes them, ASCII-escaped), its
//! `content_hash`, the files whose blob the ledger lacks, and the flat store's index. The
//! rows come in path order; the binding reads them, this decides what they mean.

use std::collections::BTreeMap;

use agentledger_core::hash::{to_hex_prefixed, Sha256Hasher, SHA256_PREFIX};

use crate::pyjson;
use crate::store::CAS_DIR;
use crate::store_index::StoreIndex;

/// How every manifest starts.
pub const FILES: &[u8] = b"{\"files\":[";

/// One row of `bernstein_files`, borrowed.
pub struct FileRow<'a> {
    pub path: &'a [u8],
    pub kind: &'a [u8],
    pub digest: Option<&'a [u8]>,
    pub import_id: i64,
    /// The ledger holds no blob under `digest`.
    pub absent: bool,
}

/// The manifests, absent blobs and store index of the rows added so far.
#[derive(Default)]
pub struct ImportedFiles {
    /// Each import's manifest so far: `{"files":[[path, kind, digest], …` (unclosed).
    pub manifests: BTreeMap<i64, Vec<u8>>,
    /// `(path, digest)` of the files whose blob the ledger lacks, in path order.
    pub absent: Vec<(String, String)>,
    pub index: StoreIndex,
    /// Each manifest's `content_hash`, closed (by [`ImportedFiles::close`]).
    pub hashes: BTreeMap<i64, String>,
    /// Whether `.sdd/cas` is listed as a folder (bernstein skips every byte check without).
    pub has_store: bool,
    key: Vec<u8>,
}

impl ImportedFiles {
    /// The next row (in path order); a store name starts after `name_from` characters of
    /// a path (see [`store_key`]).
    pub fn add(&mut self, row: &FileRow<'_>, name_from: usize) {
        let manifest = self
            .manifests
            .entry(row.import_id)
            .or_insert_with(|| FILES.to_vec());
        if manifest.len() > FILES.len() {
            manifest.push(b',');
        }
        manifest.push(b'[');
        for (column, value) in [Some(row.path), Some(row.kind), row.digest]
            .into_iter()
            .enumerate()
        {
            if column > 0 {
                manifest.push(b',');
            }
            match value {
                // ASCII-escaped: any text is written (a mismatch is decided in Python).
                Some(text) => {
                    let _ = pyjson::write_py_string(text, true, manifest);
                }
                None => manifest.extend_from_slice(b"null"),
            }
        }
        manifest.push(b']');
        if row.path == CAS_DIR && row.kind == b"dir" {
            self.has_store = true;
        }
        if let Some(digest) = row.digest {
            let lossy = |text: &[u8]| String::from_utf8_lossy(text).into_owned();
            if row.absent {
                self.absent.push((lossy(row.path), lossy(digest)));
            }
            if store_key(row.path, row.kind, name_from, &mut self.key) {
                self.index.insert(&self.key, digest);
            }
        }
    }

    /// The store index the verifiers read, when the workdir has a store.
    pub fn store(&self) -> Option<&StoreIndex> {
        self.has_store.then_some(&self.index)
    }

    /// Every row is in: each manifest's `content_hash`, closed by `closing`.
    pub fn close(&mut self, closing: &[u8]) {
        self.hashes = self
            .manifests
            .keys()
            .map(|&id| {
                (
                    id,
                    manifest_hash(manifest_parts(&self.manifests, closing, id)),
                )
            })
            .collect();
    }
}

/// What closes every manifest: `],"format":"…"}`.
pub fn closing(format: &str) -> Vec<u8> {
    let mut closing = b"],\"format\":".to_vec();
    let _ = pyjson::write_py_string(format.as_bytes(), true, &mut closing);
    closing.push(b'}');
    closing
}

/// `content_hash` of the manifest `parts`.
pub fn manifest_hash(parts: [&[u8]; 2]) -> String {
    let mut hasher = Sha256Hasher::new();
    for part in parts {
        hasher.update(part);
    }
    to_hex_prefixed(SHA256_PREFIX, &hasher.finalize())
}

/// The manifest's bytes, in pieces: its rows (none: an empty list), then `closing`.
pub fn manifest_parts<'m>(
    manifests: &'m BTreeMap<i64, Vec<u8>>,
    closing: &'m [u8],
    import_id: i64,
) -> [&'m [u8]; 2] {
    let files = manifests.get(&import_id).map_or(FILES, Vec::as_slice);
    [files, closing]
}

/// Whether a `bernstein_files` row with a digest is in the store index, and its key in
/// `key`: a `cas` file whose name, the path after its first `name_from` characters, has no
/// `/` (a plain name in the flat store), keyed by `sha256:` + that name. Characters are
/// counted as SQLite's `substr` counts them, so that the index matches what SQL selects.
pub fn store_key(path: &[u8], kind: &[u8], name_from: usize, key: &mut Vec<u8>) -> bool {
    if kind != b"cas" {
        return false;
    }
    let mut at = 0;
    for _ in 0..name_from {
        // SQLite's SQLITE_SKIP_UTF8: a lead byte takes its continuation bytes with it.
        let Some(&lead) = path.get(at) else { break };
        at += 1;
        if lead >= 0xC0 {
            while path.get(at).is_some_and(|&b| b & 0xC0 == 0x80) {
                at += 1;
            }
        }
    }
    let name = &path[at..];
    if name.contains(&b'/') {
        return false;
    }
    key.clear();
    key.extend_from_slice(SHA256_PREFIX.as_bytes());
    key.extend_from_slice(name);
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_manifest_is_python_json_of_its_rows_and_its_hash_the_closed_bytes() {
        let mut files = ImportedFiles::default();
        let row = |path: &'static [u8], digest: Option<&'static [u8]>| FileRow {
            path,
            kind: b"cas",
            digest,
            import_id: 1,
            absent: false,
        };
        files.add(&row(b".sdd/cas/ab", Some(b"sha256:ab")), 9);
        files.add(&row(b".sdd/x/\xc3\xa9", None), 9);
        assert!(!files.has_store && files.store().is_none());
        let closing = closing("bernstein-3.23.0");
        files.close(&closing);
        let manifest = [files.manifests[&1].as_slice(), closing.as_slice()].concat();
        assert_eq!(
            manifest,
            br#"{"files":[[".sdd/cas/ab","cas","sha256:ab"],[".sdd/x/\u00e9","cas",null]],"format":"bernstein-3.23.0"}"#
        );
        assert_eq!(files.hashes[&1], manifest_hash([&manifest, b""]));
        assert!(files.index.get(b"sha256:ab").is_some());
        let folder = FileRow {
            path: CAS_DIR,
            kind: b"dir",
            digest: None,
            import_id: 1,
            absent: false,
        };
        files.add(&folder, 9);
        assert!(files
            .store()
            .is_some_and(|index| index.get(b"sha256:ab").is_some()));
    }

    #[test]
    fn a_store_key_counts_characters_as_sqlite_does() {
        let mut key = Vec::new();
        assert!(store_key("é/cas/ab".as_bytes(), b"cas", 6, &mut key));
        assert_eq!(key, b"sha256:ab");
        assert!(!store_key(b".sdd/cas/a/b", b"cas", 9, &mut key));
        assert!(!store_key(b".sdd/cas/ab", b"other", 9, &mut key));
    }
}
