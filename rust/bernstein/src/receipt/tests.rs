use super::*;
use crate::pyjson::{encode_utf8, parse, printable};

// ---- verify_receipt against the Python reference ---------------------------------------
//
// `tests/data/receipt_cases.json` holds receipts and what `reports.verify_receipt` gave
// for each (run with bernstein's Python); `receipt_base64.json` the same for the base64
// decoders and the PEM reader alone. The receipts under `tests/data/receipts/` are four
// of the fixture workdir's stored receipts, byte for byte.

use std::borrow::Cow;
use std::collections::HashMap;

use crate::store::Store;
use crate::Crash;

const FIXTURES: [(&str, &str); 4] = [
    (
        "a395aa755f4398923c736858fa533b76e8f66a683cec15ba7fa196061b3859f0",
        include_str!("../../tests/data/receipts/a395aa755f4398923c736858fa533b76e8f66a683cec15ba7fa196061b3859f0.json"),
    ),
    (
        "4f9fa7a2df6656bb21c5adef1fc145b0a6aa4b46cb983ba79cd08505ef49a87d",
        include_str!("../../tests/data/receipts/4f9fa7a2df6656bb21c5adef1fc145b0a6aa4b46cb983ba79cd08505ef49a87d.json"),
    ),
    (
        "58e908baa54ab5ef4dadbdf4e2ab806ff40c2db35c35ff97d07eda962a697ef2",
        include_str!("../../tests/data/receipts/58e908baa54ab5ef4dadbdf4e2ab806ff40c2db35c35ff97d07eda962a697ef2.json"),
    ),
    (
        "a205a4679c09836a12cf2546566350173af6bdf8ff787e16f019ac2d25eecb28",
        include_str!("../../tests/data/receipts/a205a4679c09836a12cf2546566350173af6bdf8ff787e16f019ac2d25eecb28.json"),
    ),
];

/// A store that knows only the digests it is given.
struct Digests(HashMap<Vec<u8>, Vec<u8>>);

impl Store for Digests {
    fn exists(&self) -> bool {
        true
    }

    fn get(&self, _: &[u8]) -> Option<Cow<'_, [u8]>> {
        None
    }

    fn stored_digest(&self, content_hash: &[u8]) -> Option<Cow<'_, [u8]>> {
        self.0.get(content_hash).map(|d| Cow::Borrowed(&d[..]))
    }
}

fn text<'v>(value: &'v PyValue<'_>) -> &'v [u8] {
    value.as_str_bytes().expect("a string")
}

fn items<'v, 'a>(value: &'v PyValue<'a>) -> &'v [PyValue<'a>] {
    match value {
        PyValue::Array(items) => items,
        other => panic!("not a list: {other:?}"),
    }
}

fn show(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

#[test]
fn the_fixtures_stored_receipts_verify_with_their_signer() {
    let main_key = "b458f53c712230dcdb57d5c043f78aab15adeea902669acbde06c7240c98f696";
    let other_key = "dc6dee215574d18e8ef458580f90c4b59bb3143200baec04646f4439d326d23a";
    for (name, text) in FIXTURES {
        let receipt = parse(text).unwrap().value;
        let verdict = verify_receipt(&receipt, None).unwrap();
        assert!(verdict.ok, "{name}: {}", show(&verdict.reason));
        let want = if name.starts_with("58e9") {
            other_key
        } else {
            main_key
        };
        assert_eq!(hex::encode(verdict.signer.unwrap()), want, "{name}");
    }
}

#[test]
fn verdicts_are_the_python_references_byte_for_byte() {
    let count = check_cases(include_str!("../../tests/data/receipt_cases.json"));
    assert!(count > 150, "{count} cases");
}

/// Check every case of a `receipt_cases.json`; how many there were.
fn check_cases(data: &str) -> usize {
    let cases = parse(data).unwrap().value;
    let mut failures = Vec::new();
    let mut count = 0;
    for case in items(&cases) {
        count += 1;
        let name = show(text(case.get("name").unwrap()));
        let parsed;
        let receipt = if let Some(file) = case.get("receipt_file") {
            let file = std::str::from_utf8(text(file)).unwrap();
            let (_, body) = FIXTURES.iter().find(|(n, _)| *n == file).unwrap();
            parsed = parse(body).unwrap().value;
            &parsed
        } else if let Some(body) = case.get("receipt_text") {
            parsed = parse(std::str::from_utf8(text(body)).unwrap())
                .unwrap()
                .value;
            &parsed
        } else {
            case.get("receipt").unwrap()
        };
        let store = match case.get("store").unwrap() {
            PyValue::Null => None,
            PyValue::Object(members) => Some(Digests(
                members
                    .iter()
                    .map(|(k, v)| (k.to_vec(), text(v).to_vec()))
                    .collect(),
            )),
            other => panic!("store {other:?}"),
        };
        let got = verify_receipt(receipt, store.as_ref().map(|s| s as &dyn Store));
        let expect = case.get("expect").unwrap();
        let want = match expect.get("crash") {
            Some(crash) => Err(Crash(show(text(crash)))),
            None => Ok(ReceiptVerdict {
                ok: expect.get("ok") == Some(&PyValue::Bool(true)),
                reason: text(expect.get("reason").unwrap()).to_vec(),
                signer: match expect.get("signer").unwrap() {
                    PyValue::Null => None,
                    key => Some(hex::decode(text(key)).unwrap().try_into().unwrap()),
                },
                references: items(expect.get("references").unwrap())
                    .iter()
                    .map(|r| text(r).to_vec())
                    .collect(),
            }),
        };
        if got != want {
            let brief = |v: &Result<ReceiptVerdict, Crash>| match v {
                Ok(v) => format!(
                    "ok={} reason={:?} signer={:?} refs={:?}",
                    v.ok,
                    show(&v.reason),
                    v.signer.map(hex::encode),
                    v.references.iter().map(|r| show(r)).collect::<Vec<_>>()
                ),
                Err(Crash(c)) => format!("crash {c:?}"),
            };
            failures.push(format!(
                "{name}\n   got  {}\n   want {}",
                brief(&got),
                brief(&want)
            ));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    count
}

/// `ok:<hex>` or `err:<exception text>`, as the data file writes a decoding's outcome.
fn outcome(result: Result<Vec<u8>, String>) -> String {
    match result {
        Ok(bytes) => format!("ok:{}", hex::encode(bytes)),
        Err(error) => format!("err:{error}"),
    }
}

#[test]
fn base64_and_pem_decoding_is_pythons() {
    check_decodings(include_str!("../../tests/data/receipt_base64.json"));
}

/// Check every decoding a `receipt_base64.json` lists.
fn check_decodings(data: &str) {
    let doc = parse(data).unwrap().value;
    let mut failures = Vec::new();
    for pair in items(doc.get("urlsafe").unwrap()) {
        let [input, want] = items(pair) else { panic!() };
        let got = outcome(binascii::urlsafe_b64decode_padded(text(input)));
        if got.as_bytes() != text(want) {
            failures.push(format!("urlsafe {:?}: got {got:?}", show(text(input))));
        }
    }
    for pair in items(doc.get("strict").unwrap()) {
        let [input, want] = items(pair) else { panic!() };
        let got = outcome(binascii::a2b_base64(text(input), true));
        if got.as_bytes() != text(want) {
            failures.push(format!("strict {:?}: got {got:?}", show(text(input))));
        }
    }
    let mut pems = 0;
    for pair in items(doc.get("pem").unwrap()) {
        let [input, want] = items(pair) else { panic!() };
        let want = want.as_str_bytes().map(|w| hex::decode(w).unwrap());
        let got = binascii::public_key_der(text(input));
        pems += usize::from(got.is_some());
        if got != want {
            failures.push(format!("pem {:?}: got {got:?}", show(text(input))));
        }
    }
    assert!(pems > 10, "{pems} PEMs decode");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn repr_prints_what_python_3_11_prints() {
    let flags: Vec<u8> = (0x80..0x11_0000u32)
        .map(|c| u8::from(printable::is_printable(c)))
        .collect();
    let data = include_str!("../../tests/data/receipt_base64.json");
    let doc = parse(data).unwrap().value;
    let want = text(doc.get("printable_sha256").unwrap());
    assert_eq!(
        hex::encode(agentledger_core::hash::sha256(&flags)).as_bytes(),
        want
    );
    let mut out = Vec::new();
    repr_str(
        "it's \"q\" \\ \t\u{7f}\u{85}é\u{378}\u{e0080}\u{e0100}\u{1f600}".as_bytes(),
        &mut out,
    );
    assert_eq!(
        show(&out),
        concat!(
            r#"'it\'s "q" \\ \t\x7f\x85é\u0378\U000e0080"#,
            "\u{e0100}\u{1f600}'"
        )
    );
}

#[test]
fn a_lone_surrogate_to_encode_is_pythons_unicode_encode_error() {
    let mut text = "é".as_bytes().to_vec();
    crate::pyjson::push_code_point(0xDC80, &mut text);
    assert_eq!(
        encode_utf8(text.clone()),
        Err(Crash(
            "UnicodeEncodeError: 'utf-8' codec can't encode character '\\udc80' in position 1: \
             surrogates not allowed"
                .into()
        ))
    );
    crate::pyjson::push_code_point(0xD800, &mut text);
    text.push(b'x');
    crate::pyjson::push_code_point(0xD800, &mut text);
    assert_eq!(
        encode_utf8(text),
        Err(Crash(
            "UnicodeEncodeError: 'utf-8' codec can't encode characters in position 1-2: \
             surrogates not allowed"
                .into()
        ))
    );
}

/// Signed with the fixture's `k1` key; its output names bytes at `sha256:ab\u0000cd`.
const OUTPUT_NAMED_WITH_A_NUL: &str = r#"{"kind": "data", "inputs": [{"role": "input", "ref": "in", "content_hash": "sha256:582967534d0f909d196b97f9e6921342777aea87b46fa52df165389db1fb8ccf", "signature": "qZ4-2_LkFXChavvsSs5vNTDFiofu_NcVfd4FK5bCnByTPf9bPuw5iydJC8UgOjex3MxwS8CoZU68BoeqOIPRBw"}], "outputs": [{"role": "output", "ref": "out", "content_hash": "sha256:ab\u0000cd", "signature": "E1Vits5VnwN_SB64_MVxZtfLlt2EUH7-WUMtrzB6rPFMpnFlwc1WcBOZ-00UCyi2mkZyDo9mjD9LXkfg3cl-BQ"}], "plan": {"input_hashes": ["sha256:582967534d0f909d196b97f9e6921342777aea87b46fa52df165389db1fb8ccf"], "plan_hash": "sha256:bc0fd11f2b2a4f4631a4e351e07badd110b4edd3994d0002f01057dda27c7ce6", "steps": ["copy"]}, "signer_public_key_pem": "-----BEGIN PUBLIC KEY-----\nMCowBQYDK2VwAyEAtFj1PHEiMNzbV9XAQ/eKqxWt7qkCZprL3gbHJAyY9pY=\n-----END PUBLIC KEY-----\n"}"#;

#[test]
fn reattaching_an_artifact_the_store_cannot_look_up_raises() {
    let receipt = parse(OUTPUT_NAMED_WITH_A_NUL).unwrap().value;
    let verdict = verify_receipt(&receipt, None).unwrap();
    assert!(verdict.ok, "{}", show(&verdict.reason)); // plan and signatures hold
    let input = b"sha256:582967534d0f909d196b97f9e6921342777aea87b46fa52df165389db1fb8ccf";
    let store = Digests(HashMap::from([(input.to_vec(), input.to_vec())]));
    assert_eq!(
        verify_receipt(&receipt, Some(&store)).map(|v| v.ok),
        Err(Crash("ValueError: embedded null byte".into()))
    );
}
