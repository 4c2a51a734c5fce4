//! What `agentledger runs` lists of an imported journal (`view.summarize`, the reference
//! in Python): its lines, split on `\n`, that `json.loads` reads as an object (events),
//! those whose `event` is `activity.result` (activities), the others (discarded), and
//! where the last event is, for its time. `runs` lists every run: the 200,000 lines of
//! 2,000 imported journals took Python's `json` 1.5 s.
//!
//! A line nested near Python's recursion limit gets no answer here ([`summarize`] is
//! `None`): the caller asks the reference.

use std::ops::Range;

use super::ACTIVITY_EVENT;
use crate::pyjson::{decode_json_bytes, depth, parse_wtf8, PyValue, SURE_DEPTH};

/// The counts of one journal, and the last event's line as a range of its bytes.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Summary {
    pub events: u64,
    pub activities: u64,
    pub discarded: u64,
    pub last: Option<Range<usize>>,
}

/// The summary of `data`; `None` when a line is nested too deeply to say what Python
/// would (see the module docs).
pub fn summarize(data: &[u8]) -> Option<Summary> {
    let mut summary = Summary::default();
    let mut start = 0;
    let mut lines = data.split(|&b| b == b'\n').peekable();
    while let Some(line) = lines.next() {
        if line.is_empty() && lines.peek().is_none() {
            break; // what follows the last `\n` is no line
        }
        let range = start..start + line.len();
        start = range.end + 1;
        match event(line)? {
            None => summary.discarded += 1,
            Some(activity) => {
                summary.events += 1;
                summary.activities += u64::from(activity);
                summary.last = Some(range);
            }
        }
    }
    Some(summary)
}

/// `Some(is an activity)` for a line `json.loads` reads as an object, `None` for any
/// other; the outer `None` when Python's answer would hang on its stack.
fn event(line: &[u8]) -> Option<Option<bool>> {
    let Some(text) = decode_json_bytes(line) else {
        return Some(None); // UnicodeDecodeError, a ValueError
    };
    let value = match parse_wtf8(&text) {
        Ok(parsed) => parsed.value,
        Err(error) if error.to_string().contains("maximum recursion depth") => return None,
        Err(_) => return Some(None),
    };
    if depth(&value) > SURE_DEPTH {
        return None;
    }
    if !matches!(value, PyValue::Object(_)) {
        return Some(None);
    }
    let kind = value.get("event").and_then(PyValue::as_str_bytes);
    Some(Some(kind == Some(ACTIVITY_EVENT.as_bytes())))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counts(data: &str) -> Option<(u64, u64, u64, Option<&str>)> {
        let s = summarize(data.as_bytes())?;
        Some((
            s.events,
            s.activities,
            s.discarded,
            s.last.map(|r| &data[r]),
        ))
    }

    #[test]
    fn events_activities_and_discarded_lines_are_counted() {
        let journal = concat!(
            "{\"event\": \"activity.result\", \"ts\": 1}\n",
            "\n",                                               // blank: discarded
            "[1, 2]\n",                                         // not an object
            "{\"event\": \"stage.completed\"}\n",               // an event
            "{\"event\": \"activity.result\"\n",                // cut short
            "{\"event\": 1, \"event\": \"activity.result\"}\n", // the last key wins
            "NaN\n",
        );
        let last = "{\"event\": 1, \"event\": \"activity.result\"}";
        assert_eq!(counts(journal), Some((3, 2, 4, Some(last))));
    }

    #[test]
    fn a_final_line_without_newline_counts_and_an_empty_journal_is_empty() {
        assert_eq!(counts("{}\n{}"), Some((2, 0, 0, Some("{}"))));
        assert_eq!(counts(""), Some((0, 0, 0, None)));
        assert_eq!(counts("\n"), Some((0, 0, 1, None)));
        assert_eq!(counts("\n\n"), Some((0, 0, 2, None)));
    }

    #[test]
    fn deep_lines_are_left_to_python() {
        let deep = |n: usize| format!("{}{}\n", "[".repeat(n), "]".repeat(n));
        assert_eq!(counts(&deep(SURE_DEPTH)).map(|c| c.2), Some(1));
        assert_eq!(counts(&deep(SURE_DEPTH + 1)), None);
    }
}
