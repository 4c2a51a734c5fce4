//! The primitives under the report checks, with values Python gives. Whole reports, damaged
//! and not, are checked in `tests/reports.rs` against the Python reference's verdicts.

use std::borrow::Cow;

use super::browser::{list_position, norm, py_int, str_int, truthy, Raised};
use crate::pyjson::{encode_utf8, PyValue};
use crate::Crash;

fn int_of(value: PyValue<'_>) -> Result<String, Raised> {
    py_int(Some(&value))
}

#[test]
fn int_of_a_float_truncates_toward_zero_exactly() {
    let cases = [
        (2.9, "2"),
        (-2.9, "-2"),
        (-0.5, "0"),
        (-0.0, "0"),
        (5e-324, "0"),
        (9.2e18, "9200000000000000000"),
        (-9.000000000000001e18, "-9000000000000001024"),
        (-(2f64.powi(63)), "-9223372036854775808"),
        (1e20, "100000000000000000000"),
        (
            f64::MAX,
            "17976931348623157081452742373170435679807056752584499659891747680315726078002853876\
             05895586327668781715404589535143824642343213268894641827684675467035375169860499105\
             76551282076245490090389328944075868508455133942304583236903222948165808559332123348\
             274797826204144723168738177180919299881250404026184124858368",
        ),
    ];
    for (x, want) in cases {
        assert_eq!(int_of(PyValue::Float(x)), Ok(want.to_owned()), "{x:e}");
    }
    assert_eq!(
        int_of(PyValue::Float(f64::NAN)),
        Err(Raised::Caught("ValueError"))
    );
    for x in [f64::INFINITY, f64::NEG_INFINITY] {
        assert_eq!(
            int_of(PyValue::Float(x)),
            Err(Raised::Uncaught(Crash(
                "OverflowError: cannot convert float infinity to integer".into()
            )))
        );
    }
}

#[test]
fn int_of_other_values_follows_python() {
    assert_eq!(py_int(None), Ok("-1".into()));
    assert_eq!(int_of(PyValue::Bool(true)), Ok("1".into()));
    assert_eq!(int_of(PyValue::Bool(false)), Ok("0".into()));
    assert_eq!(
        int_of(PyValue::Int("-18446744073709551617".into())),
        Ok("-18446744073709551617".into())
    );
    for value in [
        PyValue::Null,
        PyValue::Array(vec![]),
        PyValue::Object(vec![]),
    ] {
        assert_eq!(int_of(value), Err(Raised::Caught("TypeError")));
    }
}

#[test]
fn int_of_a_string_reads_what_python_reads() {
    let good = [
        (" 12 ", "12"),
        ("1_0", "10"),
        ("+5", "5"),
        ("-0", "0"),
        ("00012", "12"),
        ("\x0b1\x0c", "1"),
        ("\u{85}1\u{3000}", "1"),
        ("\u{661}\u{662}", "12"),
        ("\u{ff11}\u{ff12}", "12"),
        ("\u{1d7ce}", "0"),
        ("\u{663}_\u{664}", "34"),
    ];
    for (text, want) in good {
        assert_eq!(str_int(text.as_bytes()).as_deref(), Some(want), "{text:?}");
    }
    let bad = [
        "_1",
        "1_",
        "1__0",
        "- 1",
        "+-1",
        "0x10",
        "",
        " ",
        "1.0",
        "\x1c1",
        "1\0",
        "\u{b2}",
        "\u{2167}",
        "1\x7f",
        "+_1",
        "-\u{2007}1",
    ];
    for text in bad {
        assert_eq!(str_int(text.as_bytes()), None, "{text:?}");
    }
    // A lone surrogate (WTF-8) is no digit.
    assert_eq!(str_int(b"\xed\xb2\x801"), None);
    // At most 4300 digits, leading zeros included, underscores not.
    let most = format!("{}1", "0".repeat(4299));
    assert_eq!(str_int(most.as_bytes()).as_deref(), Some("1"));
    assert_eq!(str_int(format!("0{most}").as_bytes()), None);
    let underscored = format!("{}1", "1_".repeat(4299));
    assert_eq!(str_int(underscored.as_bytes()).map(|s| s.len()), Some(4300));
}

#[test]
fn a_list_index_counts_from_the_end_and_must_fit() {
    assert_eq!(list_position("0", 3), Ok(0));
    assert_eq!(list_position("-1", 3), Ok(2));
    assert_eq!(list_position("-3", 3), Ok(0));
    let out_of_range = Err(Crash("IndexError: list index out of range".into()));
    for index in ["3", "-4", "9223372036854775807", "-9223372036854775808"] {
        assert_eq!(list_position(index, 3), out_of_range, "{index}");
    }
    assert_eq!(list_position("0", 0), out_of_range);
    let too_big = Err(Crash(
        "IndexError: cannot fit 'int' into an index-sized integer".into(),
    ));
    for index in [
        "9223372036854775808",
        "-9223372036854775809",
        "100000000000000000000",
    ] {
        assert_eq!(list_position(index, 3), too_big, "{index}");
    }
}

#[test]
fn encoding_a_lone_surrogate_fails_as_python_says() {
    let surrogate_error = |text: &[u8]| encode_utf8(text.to_vec()).err();
    assert_eq!(surrogate_error("plain é 😀".as_bytes()), None);
    assert_eq!(
        surrogate_error(b"ab\xed\xb2\x80"),
        Some(Crash(
            "UnicodeEncodeError: 'utf-8' codec can't encode character '\\udc80' in position 2: \
             surrogates not allowed"
                .into()
        ))
    );
    // A run of surrogates is named as one range, positions counted in code points.
    assert_eq!(
        surrogate_error(
            "😀"
                .bytes()
                .chain(*b"\xed\xb2\x80\xed\xb2\x81x")
                .collect::<Vec<_>>()
                .as_slice()
        ),
        Some(Crash(
            "UnicodeEncodeError: 'utf-8' codec can't encode characters in position 1-2: \
             surrogates not allowed"
                .into()
        ))
    );
}

#[test]
fn norm_collapses_ascii_whitespace_only() {
    assert_eq!(norm(b" \x0b a\x1cb \xc2\xa0 c\r\n"), b"a\x1cb \xc2\xa0 c");
    assert_eq!(norm(b"\t\n\r\x0b\x0c "), b"");
    assert_eq!(norm(b"a"), b"a");
}

#[test]
fn passed_is_python_truthiness() {
    let str_value = |s: &'static str| PyValue::Str(Cow::Borrowed(s.as_bytes()));
    let truthy_values = [
        PyValue::Bool(true),
        PyValue::Int("-1".into()),
        PyValue::Float(f64::NAN),
        PyValue::Float(0.5),
        str_value("false"),
        str_value("0"),
        PyValue::Array(vec![PyValue::Null]),
        PyValue::Object(vec![(Cow::Borrowed(&b"a"[..]), PyValue::Null)]),
    ];
    for value in truthy_values {
        assert!(truthy(Some(&value)), "{value:?}");
    }
    let falsy_values = [
        PyValue::Null,
        PyValue::Bool(false),
        PyValue::Int("0".into()),
        PyValue::Float(-0.0),
        str_value(""),
        PyValue::Array(vec![]),
        PyValue::Object(vec![]),
    ];
    for value in falsy_values {
        assert!(!truthy(Some(&value)), "{value:?}");
    }
    assert!(!truthy(None));
}

// ---- which stages must keep their report -------------------------------------------

use super::report_required;

fn observed(items: &[(&str, &str)]) -> Vec<(Vec<u8>, Vec<u8>, Vec<u8>)> {
    items
        .iter()
        .map(|&(kind, name)| (kind.into(), name.into(), b"sha256:00".to_vec()))
        .collect()
}

fn flow(steps: usize) -> Vec<(&'static str, String)> {
    (0..steps)
        .flat_map(|i| {
            [
                ("snapshot", format!("{i}:screenshot")),
                ("snapshot", format!("{i}:dom")),
                ("action_receipt", format!("{i}:action")),
            ]
        })
        .collect()
}

fn required(kind: &str, items: &[(&str, String)]) -> bool {
    let items: Vec<(&str, &str)> = items.iter().map(|(k, n)| (*k, n.as_str())).collect();
    report_required(kind.as_bytes(), &observed(&items))
}

#[test]
fn a_flow_sessions_browser_stage_must_have_its_report() {
    assert!(required("browser", &flow(1)));
    assert!(required("browser", &flow(3)));
}

#[test]
fn any_other_shape_may_be_a_legacy_stage() {
    assert!(!required("browser", &flow(0)));
    assert!(!required("research", &flow(2)));
    let mut reordered = flow(2);
    reordered.swap(0, 1);
    assert!(!required("browser", &reordered));
    let mut cut = flow(2);
    cut.pop();
    assert!(!required("browser", &cut));
    let mut renumbered = flow(2);
    renumbered.drain(..3);
    assert!(!required("browser", &renumbered));
    let mut relabelled = flow(1);
    relabelled[2].0 = "snapshot";
    assert!(!required("browser", &relabelled));
    let legacy = [
        ("snapshot", "step-0".to_owned()),
        ("action_receipt", "step-0".to_owned()),
    ];
    assert!(!required("browser", &legacy));
    let pages = [("page", "https://example.test/p0".to_owned())];
    assert!(!required("research", &pages));
}
