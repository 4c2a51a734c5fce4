//! The RFC 8785 vectors and the parser's refusals.

use super::*;
use crate::error::Error;

macro_rules! vector {
    ($dir:literal, $file:literal) => {
        include_bytes!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/vectors/jcs-rfc8785/",
            $dir,
            "/",
            $file
        ))
    };
}

/// (name, input, expected output, expected output as hex text)
const VECTORS: [(&str, &[u8], &[u8], &str); 6] = [
    (
        "arrays",
        vector!("input", "arrays.json"),
        vector!("output", "arrays.json"),
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/vectors/jcs-rfc8785/outhex/arrays.txt"
        )),
    ),
    (
        "french",
        vector!("input", "french.json"),
        vector!("output", "french.json"),
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/vectors/jcs-rfc8785/outhex/french.txt"
        )),
    ),
    (
        "structures",
        vector!("input", "structures.json"),
        vector!("output", "structures.json"),
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/vectors/jcs-rfc8785/outhex/structures.txt"
        )),
    ),
    (
        "unicode",
        vector!("input", "unicode.json"),
        vector!("output", "unicode.json"),
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/vectors/jcs-rfc8785/outhex/unicode.txt"
        )),
    ),
    (
        "values",
        vector!("input", "values.json"),
        vector!("output", "values.json"),
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/vectors/jcs-rfc8785/outhex/values.txt"
        )),
    ),
    (
        "weird",
        vector!("input", "weird.json"),
        vector!("output", "weird.json"),
        include_str!(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../../tests/vectors/jcs-rfc8785/outhex/weird.txt"
        )),
    ),
];

fn decode_hex_text(text: &str) -> Vec<u8> {
    text.split_whitespace()
        .map(|pair| u8::from_str_radix(pair, 16).unwrap())
        .collect()
}

#[test]
fn rfc8785_vectors_canonicalize_to_their_expected_output() {
    for (name, input, output, outhex) in VECTORS {
        let canonical = canonicalize_json(input).unwrap_or_else(|e| panic!("{name}: {e}"));
        assert_eq!(
            String::from_utf8_lossy(&canonical),
            String::from_utf8_lossy(output),
            "{name}"
        );
        assert_eq!(canonical, decode_hex_text(outhex), "{name} (outhex)");
    }
}

#[test]
fn rfc8785_outputs_are_canonical_and_inputs_are_not() {
    for (name, input, output, _) in VECTORS {
        assert!(is_canonical(output).unwrap(), "{name}");
        assert!(!is_canonical(input).unwrap(), "{name}");
        assert_eq!(
            canonicalize_json(output).unwrap(),
            output,
            "{name} idempotent"
        );
    }
}

#[test]
fn weird_vector_needs_utf16_key_order_not_code_point_order() {
    let value = parse(vector!("input", "weird.json")).unwrap();
    let mut keys: Vec<&str> = value
        .as_object()
        .unwrap()
        .iter()
        .map(|(k, _)| k.as_str())
        .collect();
    keys.sort(); // code-point order
    let by_code_point = Value::Object(keys.iter().map(|k| (k.to_string(), Value::Null)).collect());
    let rendered = String::from_utf8(to_canonical(&by_code_point).unwrap()).unwrap();
    // Canonical order puts the smiley (surrogate pair D83D..) before U+FB33.
    assert!(rendered.find('😂').unwrap() < rendered.find('\u{FB33}').unwrap());
    assert!(keys.iter().position(|k| *k == "😂") > keys.iter().position(|k| *k == "\u{FB33}"));
}

#[test]
fn parsed_values_keep_text_order_and_unescape() {
    let value = parse(br#" {"b": [1, -0, 2.5e1, "x\u0041\n"], "a": {"c": null}} "#).unwrap();
    assert_eq!(
        value,
        Value::Object(vec![
            (
                "b".into(),
                Value::Array(vec![
                    Value::Number(1.0),
                    Value::Number(-0.0),
                    Value::Number(25.0),
                    Value::String("xA\n".into()),
                ])
            ),
            ("a".into(), Value::Object(vec![("c".into(), Value::Null)])),
        ])
    );
    assert_eq!(value.get("a").unwrap().get("c"), Some(&Value::Null));
    assert_eq!(value.get("zz"), None);
    assert_eq!(
        canonicalize_json(br#" {"b": [1, -0, 2.5e1, "x\u0041\n"], "a": {"c": null}} "#).unwrap(),
        br#"{"a":{"c":null},"b":[1,0,25,"xA\n"]}"#
    );
}

#[test]
fn surrogate_pair_escapes_combine_into_one_character() {
    assert_eq!(
        parse(br#""\ud83d\ude02""#).unwrap(),
        Value::String("😂".into())
    );
    assert_eq!(
        parse(br#""\uD83D\uDE02""#).unwrap(),
        Value::String("😂".into())
    );
    assert_eq!(
        canonicalize_json(br#""\u00e9\u001F\u007f\/""#).unwrap(),
        "\"é\\u001f\u{7f}/\"".as_bytes()
    );
}

#[test]
fn numbers_are_correctly_rounded() {
    let cases: [(&[u8], f64); 8] = [
        (b"0.1", 0.1),
        (b"1e-400", 0.0),
        (b"-1e-400", -0.0),
        (b"2.2250738585072011e-308", 2.225_073_858_507_201e-308),
        (b"9007199254740993", 9_007_199_254_740_992.0),
        (b"123456789012345", 123_456_789_012_345.0),
        (b"1.7976931348623157e308", f64::MAX),
        (b"4.9e-324", 5e-324),
    ];
    for (text, expected) in cases {
        let parsed = parse(text).unwrap().as_f64().unwrap();
        assert_eq!(
            parsed.to_bits(),
            expected.to_bits(),
            "{:?}",
            std::str::from_utf8(text)
        );
    }
    assert_eq!(canonicalize_json(b"1E30").unwrap(), b"1e+30");
    assert_eq!(canonicalize_json(b"-0.0").unwrap(), b"0");
    assert_eq!(canonicalize_json(b"100e-2").unwrap(), b"1");
}

/// Parse `text`, expect a refusal at byte `position` whose message contains `needle`.
#[track_caller]
fn assert_refused(text: &[u8], needle: &str, position: usize) {
    match parse(text) {
        Ok(v) => panic!("{:?} parsed as {v:?}", String::from_utf8_lossy(text)),
        Err(Error::Canonicalization {
            message,
            position: Some(p),
        }) => {
            assert!(
                message.contains(needle),
                "{:?}: message {message:?} lacks {needle:?}",
                String::from_utf8_lossy(text)
            );
            assert_eq!(
                p,
                position,
                "{:?}: {message}",
                String::from_utf8_lossy(text)
            );
        }
        Err(e) => panic!("unexpected error {e:?}"),
    }
    assert!(canonicalize_json(text).is_err());
    assert!(is_canonical(text).is_err());
}

#[test]
fn empty_and_whitespace_only_inputs_are_refused() {
    assert_refused(b"", "empty input", 0);
    assert_refused(b"  \n", "end of input", 3);
}

#[test]
fn invalid_utf8_is_refused_at_its_byte() {
    assert_refused(b"\"ab\xff\"", "invalid UTF-8", 3);
    assert_refused(b"[\"\xc3\"]", "invalid UTF-8", 2);
    // An encoded surrogate (CESU-8) is not UTF-8 either.
    assert_refused(b"\"\xed\xa0\x80\"", "invalid UTF-8", 1);
}

#[test]
fn duplicate_keys_are_refused_after_unescaping() {
    assert_refused(br#"{"a":1,"a":2}"#, "duplicate object key", 7);
    assert_refused(br#"{"a":1,"\u0061":2}"#, "duplicate object key", 7);
    assert_refused(br#"{"x":{"k":1, "k":1}}"#, "duplicate object key", 13);
    // Large objects take the sorting path; the first repetition in text order is reported.
    let mut text = String::from("{");
    for i in 0..40 {
        text.push_str(&format!("\"k{i}\":{i},"));
    }
    let first_repeat = text.len();
    text.push_str("\"k7\":0,\"k3\":0}");
    assert_refused(text.as_bytes(), "\"k7\"", first_repeat);
    // The same key in different objects is fine.
    assert!(parse(br#"[{"a":1},{"a":2},{"b":{"a":3}}]"#).is_ok());
}

#[test]
fn invalid_escapes_are_refused_at_the_backslash() {
    assert_refused(br#""a\x""#, "invalid escape", 2);
    assert_refused(br#""\u12""#, "\\u escape", 1);
    assert_refused(br#""\u12"#, "\\u escape", 1);
    assert_refused(br#""\uzzzz""#, "\\u escape", 1);
    assert_refused(br#""\U0041""#, "invalid escape", 1);
    assert_refused(b"\"\\", "invalid escape", 1);
}

#[test]
fn lone_surrogate_escapes_are_refused() {
    assert_refused(br#""\ud800""#, "lone high surrogate", 1);
    assert_refused(br#""x\udc00""#, "lone low surrogate", 2);
    assert_refused(br#""\ud800\u0041""#, "lone high surrogate", 1);
    assert_refused(br#""\ud800\ud800""#, "lone high surrogate", 1);
    assert_refused(br#""\ud800x""#, "lone high surrogate", 1);
    assert_refused(br#""\ud83d\ude02\ude02""#, "lone low surrogate", 13);
    assert_refused(br#"{"\udbff":1}"#, "lone high surrogate", 2);
}

#[test]
fn unescaped_control_characters_in_strings_are_refused() {
    assert_refused(b"\"a\nb\"", "control character U+000A", 2);
    assert_refused(b"\"\x00\"", "control character U+0000", 1);
    assert_refused(b"\"\x1f\"", "control character U+001F", 1);
    // U+007F is not a JSON control character.
    assert_eq!(parse(b"\"\x7f\"").unwrap(), Value::String("\u{7f}".into()));
}

#[test]
fn non_finite_literals_are_refused() {
    assert_refused(b"NaN", "NaN", 0);
    assert_refused(b"[Infinity]", "Infinity", 1);
    assert_refused(b"[1, -Infinity]", "-Infinity", 4);
    assert_refused(b"nan", "invalid literal", 0);
    assert_refused(b"tru", "invalid literal", 0);
    assert_refused(b"nul", "invalid literal", 0);
}

#[test]
fn malformed_numbers_are_refused() {
    assert_refused(b"01", "leading zero", 0);
    assert_refused(b"[-012]", "leading zero", 1);
    assert_refused(b"00", "leading zero", 0);
    assert_refused(b"1.", "after '.'", 2);
    assert_refused(b".5", "where a JSON value was expected", 0);
    assert_refused(b"-", "expected a digit", 1);
    assert_refused(b"-a", "expected a digit", 1);
    assert_refused(b"1e", "exponent digit", 2);
    assert_refused(b"1e+", "exponent digit", 3);
    assert_refused(b"+1", "where a JSON value was expected", 0);
    assert_refused(b"0x10", "trailing data", 1);
    assert_refused(b"1.5.2", "trailing data", 3);
}

#[test]
fn numbers_overflowing_a_double_are_refused_but_underflow_is_zero() {
    assert_refused(b"1e400", "out of the range", 0);
    assert_refused(b"[0, -1e309]", "out of the range", 4);
    assert_refused(
        b"1797693134862315807937289714053e279",
        "out of the range",
        0,
    );
    assert_eq!(canonicalize_json(b"1e-400").unwrap(), b"0");
    assert_eq!(canonicalize_json(b"-1e-400").unwrap(), b"0");
    // The largest double is fine, as is a text that rounds down to it.
    assert_eq!(
        canonicalize_json(b"1.7976931348623158e308").unwrap(),
        b"1.7976931348623157e+308"
    );
}

#[test]
fn trailing_data_is_refused_but_whitespace_is_allowed() {
    assert_refused(b"{} {}", "trailing data", 3);
    assert_refused(b"1 2", "trailing data", 2);
    assert_refused(b"null,", "trailing data", 4);
    assert_refused(b"\"a\"\"b\"", "trailing data", 3);
    assert_eq!(
        canonicalize_json(b" \t\r\n[ 1 ,\n2 ]\r\n ").unwrap(),
        b"[1,2]"
    );
}

#[test]
fn structural_errors_are_refused_at_their_byte() {
    assert_refused(b"[1,]", "where a JSON value was expected", 3);
    assert_refused(b"[1 2]", "expected ',' or ']'", 3);
    assert_refused(b"{\"a\" 1}", "expected ':'", 5);
    assert_refused(b"{\"a\":1,}", "object key", 7);
    assert_refused(b"{1:2}", "object key", 1);
    assert_refused(b"{\"a\":1", "expected ',' or '}'", 6);
    assert_refused(b"[", "end of input", 1);
    assert_refused(b"\"abc", "unterminated string", 0);
    assert_refused(b"\xef\xbb\xbf{}", "where a JSON value was expected", 0);
    assert_refused(b"[\x0b1]", "where a JSON value was expected", 1);
}

#[test]
fn nesting_up_to_max_depth_is_accepted() {
    let text = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert_eq!(canonicalize_json(text.as_bytes()).unwrap(), text.as_bytes());
    let objects = format!("{}1{}", "{\"a\":".repeat(MAX_DEPTH), "}".repeat(MAX_DEPTH));
    assert_eq!(
        canonicalize_json(objects.as_bytes()).unwrap(),
        objects.as_bytes()
    );
}

#[test]
fn nesting_deeper_than_max_depth_is_refused_at_the_bracket() {
    let text = format!("{}{}", "[".repeat(MAX_DEPTH + 1), "]".repeat(MAX_DEPTH + 1));
    assert_refused(text.as_bytes(), "nesting deeper than 128", MAX_DEPTH);
    let mixed = format!("{}{{}}{}", "[{\"k\":".repeat(64), "}]".repeat(64));
    assert_refused(mixed.as_bytes(), "nesting deeper than 128", 64 * 6);
}

#[test]
fn hostile_nesting_gives_a_clean_error_not_a_stack_overflow() {
    let text = "[".repeat(100_000);
    assert_refused(text.as_bytes(), "nesting deeper", MAX_DEPTH);
    let text = "{\"a\":".repeat(100_000);
    assert_refused(text.as_bytes(), "nesting deeper", MAX_DEPTH * 5);
}

#[test]
fn is_canonical_tells_canonical_text_from_equivalent_text() {
    assert!(is_canonical(br#"{"a":[1,"x"],"b":null}"#).unwrap());
    assert!(is_canonical(b"0").unwrap());
    assert!(!is_canonical(br#"{"b":null,"a":[1,"x"]}"#).unwrap());
    assert!(!is_canonical(br#"{"a":[1, "x"],"b":null}"#).unwrap());
    assert!(!is_canonical(b" 0").unwrap());
    assert!(!is_canonical(b"0 ").unwrap());
    assert!(!is_canonical(b"1.0").unwrap());
    assert!(!is_canonical(b"-0").unwrap());
    assert!(!is_canonical(br#""\u0041""#).unwrap());
    assert!(!is_canonical(br#""\/""#).unwrap());
}

#[test]
fn large_strings_round_trip() {
    let big = "é\"x".repeat(1_000_000);
    let mut text = Vec::new();
    write_string(&big, &mut text);
    assert_eq!(parse(&text).unwrap(), Value::String(big));
    assert!(is_canonical(&text).unwrap());
}
