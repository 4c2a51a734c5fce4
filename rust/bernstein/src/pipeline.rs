//! The one pipeline every bernstein verify runs: the calling thread reads the journals in
//! order from a [`Source`] while the pool verifies each one as it arrives (journal pass,
//! then [`verify_run`]), with a bounded number of journals in flight, so memory holds a
//! few journals and the verdicts, never the workspace. Between two journals the caller is
//! asked whether to go on (Ctrl-C), and an error stops the reading at once.

use std::sync::{Condvar, Mutex, OnceLock};

use crate::audit::ActivityRecord;
use crate::journal::verify_journal_with;
use crate::store::Store;
use crate::store_index::StoreIndex;
use crate::verify::{verify_run, Audit, Options, Run};

/// Where a verify reads a workdir: its journals (read by one thread, in order) and its
/// content store (read by the pool).
pub trait Source: Store {
    type Error: Send;

    /// The journal of run number `run` (`None`: the run has no journal).
    fn journal(&self, run: usize) -> Result<Option<Vec<u8>>, Self::Error>;

    /// The store's index (content hash -> stored digest), when the source has one: the
    /// journal pass then reattaches observations without asking the store.
    fn index(&self) -> Option<&StoreIndex> {
        None
    }
}

/// The audit records of one run, by run id (a chain that mirrors activities), or `None`.
pub type AuditRecords<'a> = Option<&'a (dyn Fn(&[u8]) -> Vec<&'a ActivityRecord> + Sync)>;

/// Journals read ahead of the pool, per pool thread.
const AHEAD_PER_THREAD: usize = 4;

/// Verify runs `run_ids` (their journals are `source.journal(0..)`) on `pool`, in order.
/// `between(n)` is called before reading journal `n`; its error, or the source's, stops
/// the reading and is returned once the journals in flight are done.
pub fn verify_runs<S: Source>(
    source: &S,
    run_ids: &[Vec<u8>],
    audit: AuditRecords<'_>,
    options: Options<'_>,
    pool: &rayon::ThreadPool,
    mut between: impl FnMut(usize) -> Result<(), S::Error>,
) -> Result<Vec<Run>, S::Error> {
    let verdicts: Vec<OnceLock<Run>> = run_ids.iter().map(|_| OnceLock::new()).collect();
    let limit = pool.current_num_threads().max(1) * AHEAD_PER_THREAD;
    let in_flight = Flight::default();
    let read = pool.in_place_scope(|scope| {
        for (n, run_id) in run_ids.iter().enumerate() {
            between(n)?;
            let journal = source.journal(n)?;
            in_flight.enter(limit);
            let (verdicts, in_flight) = (&verdicts, &in_flight);
            scope.spawn(move |_| {
                // Leaves the flight even when the verify panics: the reader must not wait
                // for it (the scope then hands the panic to the caller).
                let _leave = Leave(in_flight);
                let report = journal
                    .as_deref()
                    .map(|data| verify_journal_with(data, source.index()));
                drop(journal);
                let records = audit.map(|records| records(run_id));
                let audit = records.as_deref().map(|records| Audit { records });
                let run = verify_run(run_id, report.as_ref(), source, audit, options);
                let _ = verdicts[n].set(run);
            });
        }
        Ok(())
    });
    read?;
    Ok(verdicts
        .into_iter()
        .map(|verdict| {
            verdict
                .into_inner()
                .expect("every spawned run sets its verdict")
        })
        .collect())
}

/// How many journals are read and not yet verified.
#[derive(Default)]
struct Flight {
    count: Mutex<usize>,
    changed: Condvar,
}

impl Flight {
    fn enter(&self, limit: usize) {
        let mut count = self.count.lock().unwrap_or_else(|p| p.into_inner());
        while *count >= limit {
            count = self.changed.wait(count).unwrap_or_else(|p| p.into_inner());
        }
        *count += 1;
    }

    fn leave(&self) {
        *self.count.lock().unwrap_or_else(|p| p.into_inner()) -= 1;
        self.changed.notify_one();
    }
}

/// A journal's place in the flight, given back when dropped.
struct Leave<'f>(&'f Flight);

impl Drop for Leave<'_> {
    fn drop(&mut self) {
        self.0.leave();
    }
}

#[cfg(test)]
mod tests {
    use std::borrow::Cow;
    use std::collections::HashMap;
    use std::sync::atomic::{AtomicUsize, Ordering};

    use super::*;
    use crate::journal::tests::journal;
    use crate::store::content_hash;

    /// A workdir in memory; counts the journals read and not yet dropped.
    struct Memory {
        journals: Vec<Option<Vec<u8>>>,
        blobs: HashMap<Vec<u8>, Vec<u8>>,
        read: AtomicUsize,
    }

    impl Store for Memory {
        fn exists(&self) -> bool {
            true
        }
        fn get(&self, content_hash: &[u8]) -> Option<Cow<'_, [u8]>> {
            self.blobs.get(content_hash).map(|b| Cow::Borrowed(&b[..]))
        }
        fn stored_digest<'a>(&'a self, hash: &'a [u8]) -> Option<Cow<'a, [u8]>> {
            self.blobs.get(hash).map(|b| Cow::Owned(content_hash(b)))
        }
    }

    impl Source for Memory {
        type Error = String;
        fn journal(&self, run: usize) -> Result<Option<Vec<u8>>, String> {
            self.read.fetch_add(1, Ordering::SeqCst);
            Ok(self.journals[run].clone())
        }
    }

    fn activity(page: &[u8], kind: &str) -> String {
        let digest = String::from_utf8(content_hash(page)).unwrap();
        let evidence = crate::journal::evidence_set_hash(&[digest.as_bytes()]).unwrap();
        format!(
            ", \"stage_id\": \"s\", \"kind\": \"{kind}\", \"artifact_hash\": \"sha256:{}\", \
             \"evidence_set_hash\": \"{evidence}\", \"terminal_state\": \"completed\", \
             \"reason_code\": \"ok\", \"observations\": [{{\"kind\": \"page\", \"ref\": \"p\", \
             \"content_hash\": \"{digest}\"}}]",
            "ab".repeat(32)
        )
    }

    fn workdir(runs: usize) -> (Memory, Vec<Vec<u8>>) {
        let page = b"page bytes".to_vec();
        let extra = activity(&page, "coding");
        let journals = (0..runs)
            .map(|n| match n % 3 {
                0 => None,
                1 => Some(journal(&[("run_started", ""), ("activity.result", &extra)])),
                _ => Some(journal(&[("run_started", "")])),
            })
            .collect();
        let blobs = HashMap::from([(content_hash(&page), page)]);
        let ids = (0..runs).map(|n| format!("run-{n}").into_bytes()).collect();
        let memory = Memory {
            journals,
            blobs,
            read: AtomicUsize::new(0),
        };
        (memory, ids)
    }

    fn pool(threads: usize) -> rayon::ThreadPool {
        rayon::ThreadPoolBuilder::new()
            .num_threads(threads)
            .build()
            .unwrap()
    }

    #[test]
    fn verdicts_come_back_in_order_and_equal_one_run_at_a_time() {
        let (memory, ids) = workdir(50);
        let options = Options::default();
        let runs = verify_runs(&memory, &ids, None, options, &pool(3), |_| Ok(())).unwrap();
        assert_eq!(runs.len(), 50);
        for (n, run) in runs.iter().enumerate() {
            let report = memory.journals[n]
                .as_deref()
                .map(|data| verify_journal_with(data, None));
            let alone = verify_run(&ids[n], report.as_ref(), &memory, None, options);
            assert_eq!(run, &alone, "run {n}");
        }
        assert_eq!(runs[0].reason, b"no run journal for 'run-0'");
        assert_eq!(
            (runs[1].found, runs[1].ok, runs[1].compat_code()),
            (true, true, 0)
        );
        assert_eq!(runs[2].compat_code(), 1);
        assert_eq!(
            runs[2].reason,
            b"run journal holds no activity.result entries"
        );
    }

    #[test]
    fn a_missing_page_fails_the_stage_with_bernsteins_reason() {
        let (mut memory, ids) = workdir(3);
        memory.blobs.clear();
        let runs = verify_runs(
            &memory,
            &ids,
            None,
            Options::default(),
            &pool(2),
            |_| Ok(()),
        )
        .unwrap();
        assert_eq!(runs[1].compat_code(), 2);
        assert_eq!(runs[1].reason, b"evidence bytes missing from store for 'p'");
        let checks: Vec<&str> = runs[1].findings.iter().map(|f| f.check.as_str()).collect();
        assert_eq!(checks, ["bernstein.blob.missing", "bernstein.stage"]);
    }

    #[test]
    fn an_error_between_journals_stops_the_reading() {
        let (memory, ids) = workdir(100);
        let stopped = verify_runs(&memory, &ids, None, Options::default(), &pool(2), |n| {
            if n == 10 {
                Err("interrupted".to_owned())
            } else {
                Ok(())
            }
        });
        assert_eq!(stopped.unwrap_err(), "interrupted");
        assert_eq!(memory.read.load(Ordering::SeqCst), 10);
    }

    #[test]
    fn journals_in_flight_stay_bounded() {
        // A source whose journals are only released when the pool has taken them: the
        // reader must wait at the bound rather than read everything ahead.
        struct Counting {
            memory: Memory,
            held: AtomicUsize,
            most: AtomicUsize,
        }
        impl Store for Counting {
            fn exists(&self) -> bool {
                true
            }
            fn get(&self, hash: &[u8]) -> Option<Cow<'_, [u8]>> {
                // Each run's stage asks the store once: the journal is done with by then.
                self.held.fetch_sub(1, Ordering::SeqCst);
                std::thread::sleep(std::time::Duration::from_millis(1));
                self.memory.get(hash)
            }
            fn stored_digest<'a>(&'a self, hash: &'a [u8]) -> Option<Cow<'a, [u8]>> {
                self.memory.stored_digest(hash)
            }
        }
        impl Source for Counting {
            type Error = String;
            fn journal(&self, run: usize) -> Result<Option<Vec<u8>>, String> {
                let now = self.held.fetch_add(1, Ordering::SeqCst) + 1;
                self.most.fetch_max(now, Ordering::SeqCst);
                self.memory.journal(run)
            }
        }
        let page = b"x".to_vec();
        // Reattachment reads no bytes; a research stage with no stored report asks `get`.
        let research = journal(&[("activity.result", &activity(&page, "research"))]);
        let (memory, _) = workdir(0);
        let counting = Counting {
            memory: Memory {
                journals: vec![Some(research); 200],
                blobs: HashMap::from([(content_hash(&page), page)]),
                ..memory
            },
            held: AtomicUsize::new(0),
            most: AtomicUsize::new(0),
        };
        let ids: Vec<Vec<u8>> = (0..200).map(|n| vec![b'r', n as u8]).collect();
        let threads = 2;
        let runs = verify_runs(
            &counting,
            &ids,
            None,
            Options::default(),
            &pool(threads),
            |_| Ok(()),
        )
        .unwrap();
        assert!(runs.iter().all(|run| run.ok), "{:?}", runs[0]);
        let most = counting.most.load(Ordering::SeqCst);
        assert!(
            most <= threads * AHEAD_PER_THREAD + 1,
            "{most} journals in flight"
        );
    }

    #[test]
    fn a_panic_while_verifying_reaches_the_caller_instead_of_hanging() {
        struct Panicking(Memory);
        impl Store for Panicking {
            fn exists(&self) -> bool {
                true
            }
            fn get(&self, _: &[u8]) -> Option<Cow<'_, [u8]>> {
                panic!("a bug in a check")
            }
            fn stored_digest<'a>(&'a self, hash: &'a [u8]) -> Option<Cow<'a, [u8]>> {
                self.0.stored_digest(hash)
            }
        }
        impl Source for Panicking {
            type Error = String;
            fn journal(&self, run: usize) -> Result<Option<Vec<u8>>, String> {
                self.0.journal(run)
            }
        }
        let page = b"x".to_vec();
        let research = journal(&[("activity.result", &activity(&page, "research"))]);
        let (memory, _) = workdir(0);
        let source = Panicking(Memory {
            journals: vec![Some(research); 100],
            ..memory
        });
        let ids: Vec<Vec<u8>> = (0..100).map(|n| vec![b'r', n as u8]).collect();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            verify_runs(
                &source,
                &ids,
                None,
                Options::default(),
                &pool(2),
                |_| Ok(()),
            )
        }));
        assert!(outcome.is_err(), "the panic must reach the caller");
    }
}
