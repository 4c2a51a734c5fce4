// Temporary: single-thread timing of verify_journal over a workdir's journals.
#[global_allocator]
static A: mimalloc::MiMalloc = mimalloc::MiMalloc;
use std::time::Instant;
fn main() {
    let root = std::env::args().nth(1).unwrap();
    let mut journals = Vec::new();
    for entry in std::fs::read_dir(format!("{root}/.sdd/runs")).unwrap() {
        let p = entry.unwrap().path().join("journal.jsonl");
        journals.push(std::fs::read(p).unwrap());
    }
    let mut best = f64::MAX;
    for _ in 0..9 {
        let t = Instant::now();
        let mut n = 0;
        for j in &journals {
            let r = agentledger_core::pyjson::journal::verify_journal(j);
            n += r.count as usize + r.activities.len();
        }
        best = best.min(t.elapsed().as_secs_f64());
        assert_eq!(n, 133000);
    }
    println!("best {best:.4}");
}
