//! When a long call that runs without the GIL takes it back to look at Ctrl-C (and to
//! report progress): at most every [`LOOK_EVERY`]. Taking the GIL back is not free: beside
//! a busy Python thread it waits up to that thread's switch interval (5 ms), so a pass that
//! looked once per batch or per journal paid that wait hundreds of times.

use std::time::{Duration, Instant};

/// The least time between two looks; also what Ctrl-C waits at most for one.
pub const LOOK_EVERY: Duration = Duration::from_millis(50);

/// The time of the last look.
pub struct Looks(Instant);

impl Looks {
    pub fn new() -> Self {
        Looks(Instant::now())
    }

    /// Whether it is time to look again (then counted as a look).
    pub fn due(&mut self) -> bool {
        let due = self.0.elapsed() >= LOOK_EVERY;
        if due {
            self.0 = Instant::now();
        }
        due
    }
}
