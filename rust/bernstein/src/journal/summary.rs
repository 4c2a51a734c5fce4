//! What `agentledger runs` lists of an imported journal (`view.summarize`, the reference
//! in Python): the lines bernstein's reader keeps (events), those whose `event` is
//! `activity.result` (activities), the lines it discards, and where the last event is,
//! for its time. The lines are read as verify's walk reads them ([`super::lines`]), so
//! `runs`, `show` and `verify` count and number the same lines. `runs` lists every run:
//! the 200,000 lines of 2,000 imported journals took Python's `json` 1.5 s.

use std::ops::Range;

use super::lines::{read_lines, Line};
use super::ACTIVITY_EVENT;
use crate::pyjson::PyValue;

/// The counts of one journal, and the last event's line as a range of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    pub events: u64,
    pub activities: u64,
    pub discarded: u64,
    pub last: Option<Range<usize>>,
}

/// The summary of `data`.
pub fn summarize(data: &[u8]) -> Summary {
    let mut summary = Summary::default();
    for (_, range, line) in read_lines(data) {
        match line {
            Line::Blank => {} // never: `read_lines` skips blank lines
            Line::Discarded | Line::Crash(_) => summary.discarded += 1,
            Line::Kept(row) => {
                let kind = row.value.get("event").and_then(PyValue::as_str_bytes);
                summary.events += 1;
                summary.activities += u64::from(kind == Some(ACTIVITY_EVENT.as_bytes()));
                summary.last = Some(range);
            }
        }
    }
    summary
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(data: &str) -> (u64, u64, u64, Option<&str>) {
        let s = summarize(data.as_bytes());
        (
            s.events,
            s.activities,
            s.discarded,
            s.last.map(|r| &data[r]),
        )
    }

    #[test]
    fn events_activities_and_discarded_lines_are_counted() {
        let journal = concat!(
            "{\"event\": \"activity.result\", \"ts\": 1}\n",
            "\n",                                               // blank: skipped
            "[1, 2]\n",                                         // not an object
            "{\"event\": \"stage.completed\"}\n",               // an event
            "{\"event\": \"activity.result\"\n",                // cut short
            "{\"event\": 1, \"event\": \"activity.result\"}\n", // the last key wins
            "NaN\n",
        );
        let last = "{\"event\": 1, \"event\": \"activity.result\"}";
        assert_eq!(counts(journal), (3, 2, 3, Some(last)));
    }

    #[test]
    fn lines_end_as_universal_newlines_end_them_and_blank_ones_are_skipped() {
        assert_eq!(counts("{}\n{}"), (2, 0, 0, Some("{}")));
        assert_eq!(counts(""), (0, 0, 0, None));
        assert_eq!(counts("\n\n \t\n"), (0, 0, 0, None));
        assert_eq!(counts("{}\r{}\r\n[]\r"), (2, 0, 1, Some("{}")));
        // Stripped as `str.strip()` strips: the range is the whole physical line.
        assert_eq!(
            counts("\u{a0}{}\u{2028}\n"),
            (1, 0, 0, Some("\u{a0}{}\u{2028}"))
        );
    }

    #[test]
    fn a_line_nested_past_the_readers_limit_is_discarded() {
        let deep = |n: usize| format!("{}{}\n", "[".repeat(n), "]".repeat(n));
        let object = |n: usize| format!("{{\"a\": {}{}}}\n", "[".repeat(n), "]".repeat(n));
        assert_eq!(counts(&deep(5000)).2, 1);
        assert_eq!(counts(&object(300)).0, 1);
        assert_eq!(counts(&object(5000)).2, 1);
    }
}
