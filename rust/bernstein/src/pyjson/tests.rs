use super::*;

fn sorted_ascii(text: &str) -> String {
    let value = parse(text).unwrap().value;
    let mut out = Vec::new();
    dumps_sorted(&value, true, &mut out).unwrap();
    String::from_utf8(out).unwrap()
}

fn jcs(text: &str) -> crate::Result<String> {
    let value = parse(text)?.value;
    let mut out = Vec::new();
    dumps_jcs(&value, &mut out)?;
    Ok(String::from_utf8(out).unwrap())
}

#[test]
fn float_repr_follows_python() {
    let cases = [
        (0.1, "0.1"),
        (1e-7, "1e-07"),
        (1e16, "1e+16"),
        (1e15, "1000000000000000.0"),
        (-0.0, "-0.0"),
        (0.0, "0.0"),
        (100.0, "100.0"),
        (5e-324, "5e-324"),
        (1.2345678901234568e17, "1.2345678901234568e+17"),
        (1e-5, "1e-05"),
        (0.0001, "0.0001"),
        (1.7976931348623157e308, "1.7976931348623157e+308"),
        (0.30000000000000004, "0.30000000000000004"),
        (123.456, "123.456"),
        (562949953421312.2, "562949953421312.2"),
        (0.5, "0.5"),
        (2.5, "2.5"),
    ];
    for (x, want) in cases {
        assert_eq!(float_repr(x), want, "{x:e}");
    }
}

#[test]
fn ints_floats_and_specials_keep_their_python_types() {
    assert_eq!(
        sorted_ascii("[1, 1.0, -0, -0.0, 1E-7, 18446744073709551616]"),
        "[1,1.0,0,-0.0,1e-07,18446744073709551616]"
    );
    assert_eq!(
        sorted_ascii("[NaN, Infinity, -Infinity, 1e400]"),
        "[NaN,Infinity,-Infinity,Infinity]"
    );
}

#[test]
fn strings_escape_like_ensure_ascii_with_surrogate_pairs_and_lone_surrogates() {
    assert_eq!(
        sorted_ascii(r#""\u00e9😀\ud800x\u007f\u2028/""#),
        r#""\u00e9\ud83d\ude00\ud800x\u007f\u2028/""#
    );
    assert_eq!(sorted_ascii(r#""\ud83d\ude00""#), r#""\ud83d\ude00""#);
    assert_eq!(
        sorted_ascii("\"\\b\\f\\n\\r\\t\\u0001\""),
        "\"\\b\\f\\n\\r\\t\\u0001\""
    );
}

#[test]
fn keys_sort_by_code_point_and_the_last_duplicate_wins() {
    let parsed = parse(r#"{"b": 1, "a": 2, "b": 3}"#).unwrap();
    assert!(parsed.duplicate_keys);
    let mut out = Vec::new();
    dumps_sorted(&parsed.value, true, &mut out).unwrap();
    assert_eq!(out, br#"{"a":2,"b":3}"#);
    assert_eq!(
        sorted_ascii("{\"\u{ffff}\": 1, \"😀\": 2}"),
        r#"{"\uffff":1,"\ud83d\ude00":2}"#
    );
}

#[test]
fn jcs_uses_utf16_key_order_ecmascript_numbers_and_exact_ints() {
    assert_eq!(
        jcs("{\"\u{ffff}\": 1, \"😀\": 2}").unwrap(),
        "{\"😀\":2,\"\u{ffff}\":1}"
    );
    assert_eq!(
        jcs("[1.0, 1e-07, -0.0, 9007199254740993]").unwrap(),
        "[1,1e-7,0,9007199254740993]"
    );
    assert!(jcs("[NaN]").is_err());
    assert!(jcs(r#""\ud800""#).is_err());
}

#[test]
fn python_rejections_are_errors() {
    for bad in [
        "",
        "{",
        "[1,]",
        "{\"a\":1,}",
        "01",
        "1.",
        "\"\t\"",
        "\u{feff}{}",
        "{} x",
        "'a'",
        "nul",
        "\"\\x\"",
    ] {
        assert!(parse(bad).is_err(), "{bad:?}");
    }
    let long = "1".repeat(4301);
    assert!(parse(&long).is_err());
    assert!(parse(&"1".repeat(4300)).is_ok());
}

#[test]
fn str_of_non_strings_is_python_repr() {
    let value = parse(r#"[5, 1.5, true, null, {"a": "it's"}, ["x"]]"#)
        .unwrap()
        .value;
    let PyValue::Array(items) = value else {
        panic!()
    };
    let shown: Vec<String> = items
        .iter()
        .map(|v| String::from_utf8(py_str(v).into_owned()).unwrap())
        .collect();
    assert_eq!(
        shown,
        ["5", "1.5", "True", "None", "{'a': \"it's\"}", "['x']"]
    );
}
