//! A workdir on disk, verified in place: read the way bernstein reads it (symlinks
//! followed, any error reading a file = the file is absent).

use std::borrow::Cow;
use std::path::{Path, PathBuf};

use crate::pipeline::Source;
use crate::store::{cas_path, content_hash, Store};

/// The workdir at `root`, for the runs named (in order).
pub struct Directory {
    root: PathBuf,
    run_ids: Vec<Vec<u8>>,
    has_store: bool,
}

impl Directory {
    pub fn new(root: impl Into<PathBuf>, run_ids: Vec<Vec<u8>>) -> Self {
        let root = root.into();
        let has_store = root.join(".sdd/cas").is_dir();
        Directory {
            root,
            run_ids,
            has_store,
        }
    }

    fn read(&self, path: &str) -> Option<Vec<u8>> {
        std::fs::read(self.root.join(path)).ok()
    }
}

/// bernstein's rule for a run id: 1-64 of `A-Za-z0-9_.-`, and never `.` or `..`.
pub fn valid_run_id(run_id: &[u8]) -> bool {
    (1..=64).contains(&run_id.len())
        && run_id
            .iter()
            .all(|&b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'))
        && run_id != b"."
        && run_id != b".."
}

/// Whether `path` (resolved) lies under `parent` (resolved).
fn inside(parent: &Path, path: &Path) -> bool {
    match (parent.canonicalize(), path.canonicalize()) {
        (Ok(parent), Ok(path)) => path != parent && path.starts_with(parent),
        _ => false,
    }
}

impl Store for Directory {
    fn exists(&self) -> bool {
        self.has_store
    }

    fn get(&self, content_hash: &[u8]) -> Option<Cow<'_, [u8]>> {
        self.read(&cas_path(content_hash)?).map(Cow::Owned)
    }

    fn stored_digest<'a>(&'a self, hash: &'a [u8]) -> Option<Cow<'a, [u8]>> {
        self.get(hash).map(|data| Cow::Owned(content_hash(&data)))
    }
}

impl Source for Directory {
    type Error = std::convert::Infallible;

    fn journal(&self, run: usize) -> Result<Option<Vec<u8>>, Self::Error> {
        let run_id = &self.run_ids[run];
        if !valid_run_id(run_id) {
            return Ok(None);
        }
        // Valid run ids are ASCII.
        let relative = format!(
            ".sdd/runs/{}/journal.jsonl",
            String::from_utf8_lossy(run_id)
        );
        if !inside(&self.root.join(".sdd/runs"), &self.root.join(&relative)) {
            return Ok(None);
        }
        Ok(self.read(&relative))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn run_ids_follow_bernsteins_rule() {
        assert!(valid_run_id(b"r0001-research-report"));
        assert!(valid_run_id(&[b'a'; 64]));
        assert!(!valid_run_id(&[b'a'; 65]));
        for bad in [&b""[..], b".", b"..", b"a/b", b"a b", "é".as_bytes()] {
            assert!(!valid_run_id(bad), "{bad:?}");
        }
    }

    #[test]
    fn a_workdir_is_read_in_place() {
        let root = std::env::temp_dir().join(format!("bernstein-dir-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join(".sdd/runs/r1")).unwrap();
        std::fs::create_dir_all(root.join(".sdd/cas")).unwrap();
        std::fs::write(root.join(".sdd/runs/r1/journal.jsonl"), b"{}\n").unwrap();
        std::fs::write(root.join(".sdd/cas/ab"), b"bytes").unwrap();
        let dir = Directory::new(&root, vec![b"r1".to_vec(), b"r2".to_vec(), b"..".to_vec()]);
        assert!(dir.exists());
        assert_eq!(dir.journal(0).unwrap().as_deref(), Some(&b"{}\n"[..]));
        assert_eq!(dir.journal(1).unwrap(), None);
        assert_eq!(dir.journal(2).unwrap(), None);
        assert_eq!(dir.get(b"sha256:ab").as_deref(), Some(&b"bytes"[..]));
        assert_eq!(
            dir.stored_digest(b"sha256:ab").as_deref(),
            Some(content_hash(b"bytes").as_slice())
        );
        assert_eq!(dir.get(b"sha256:cd"), None);
        std::fs::remove_dir_all(&root).unwrap();
    }
}
