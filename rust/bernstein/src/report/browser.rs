//! A browser flow report (§6): the anchored steps replayed from the store, then every
//! check recomputed on the DOM its step left.

use std::borrow::Cow;
use std::collections::HashMap;

use memchr::memmem;

use super::{sha256_hex, Browser, CheckVerdict, StepVerdict};
use crate::pyjson::{
    code_points, dicts, encode_utf8, field, repr_text as repr, write_json_str, PyValue,
};
use crate::store::{content_hash, lookup_raises, Store};
use crate::Crash;

const ACTION_KINDS: [&[u8]; 9] = [
    b"navigate",
    b"click",
    b"type",
    b"scroll",
    b"key",
    b"select",
    b"submit",
    b"wait",
    b"screenshot",
];

const CHECK_KINDS: [&[u8]; 3] = [
    b"dom_contains",
    b"dom_not_contains",
    b"screenshot_hash_equals",
];

/// A step as `_parse_flow` keeps it: its fields through `str()`, and `int()` of its
/// index as normalized decimal text (Python ints have no size limit).
struct Step {
    action_kind: Vec<u8>,
    action_target: Vec<u8>,
    action_value_digest: Vec<u8>,
    screenshot_content_hash: Vec<u8>,
    dom_content_hash: Vec<u8>,
    dom_digest: Vec<u8>,
    observation_hash: Vec<u8>,
    prev_anchor: Vec<u8>,
    anchor: Vec<u8>,
    index: String,
}

/// A flow report as `_parse_flow` returns it.
struct Flow {
    head_anchor: Vec<u8>,
    steps: Vec<Step>,
    checks: Vec<Check>,
}

struct Check {
    check_id: Vec<u8>,
    kind: Vec<u8>,
    operand: Vec<u8>,
    step_index: String,
    passed: bool,
}

/// An exception raised while parsing the report: `ValueError` and `TypeError` are
/// caught (and become the verdict's reason), anything else is not.
#[derive(Debug, PartialEq)]
pub(super) enum Raised {
    Caught(&'static str),
    Uncaught(Crash),
}

const VALUE_ERROR: Raised = Raised::Caught("ValueError");
const TYPE_ERROR: Raised = Raised::Caught("TypeError");

/// `verify_browser_report(report, read)` for a report already parsed by `json.loads`.
/// `Err` is what bernstein's own check raises instead of giving a verdict: `int()` of an
/// infinite index, a screenshot or DOM hash the store cannot look up, a lone surrogate in
/// the anchored action or in a DOM check's operand, a check naming a step beyond the list.
pub fn verify_browser(report: &PyValue<'_>, store: &dyn Store) -> Result<Browser, Crash> {
    let mut verdict = Browser::default();
    let Flow {
        head_anchor,
        steps,
        checks,
    } = match parse_flow(report) {
        Ok(flow) => flow,
        Err(Raised::Caught(name)) => {
            verdict.reason = format!("stored flow report is not valid JSON: {name}").into_bytes();
            return Ok(verdict);
        }
        Err(Raised::Uncaught(crash)) => return Err(crash),
    };
    let mut prev: Vec<u8> = Vec::new();
    // `norm()` of the DOM each verified step left, by the step's recorded index (a later
    // step with the same index replaces it).
    let mut doms: HashMap<&str, Vec<u8>> = HashMap::new();
    let mut steps_ok = true;
    for (n, step) in steps.iter().enumerate() {
        let reason = match replay_step(n, step, &prev, store)? {
            Replayed::Dom(dom) => {
                doms.insert(&step.index, dom);
                Vec::new()
            }
            Replayed::Failed(reason) => reason,
        };
        verdict.steps.push(StepVerdict {
            index: step.index.clone(),
            ok: reason.is_empty(),
            reason: reason.clone(),
        });
        if !reason.is_empty() {
            steps_ok = false;
            verdict.reason = reason;
            break;
        }
        prev = step.anchor.clone();
    }
    verdict.head_anchor_ok = steps_ok && head_anchor == prev;
    if steps_ok && !verdict.head_anchor_ok {
        verdict.reason = [
            &b"head_anchor mismatch: recorded "[..],
            &repr(&head_anchor),
            b", replayed ",
            &repr(&prev),
        ]
        .concat();
    }
    let mut checks_ok = true;
    for check in &checks {
        let reason = match doms.get(check.step_index.as_str()) {
            None => [
                &b"check "[..],
                &repr(&check.check_id),
                b": step ",
                check.step_index.as_bytes(),
                b" did not resolve from the store",
            ]
            .concat(),
            Some(dom) => {
                let step = &steps[list_position(&check.step_index, steps.len())?];
                let result = if check.kind == b"screenshot_hash_equals" {
                    step.screenshot_content_hash == check.operand
                } else {
                    // `operand.encode("utf-8")`: strict, a lone surrogate raises.
                    let operand = encode_utf8(check.operand.clone())?;
                    let found = memmem::find(dom, &norm(&operand)).is_some();
                    found == (check.kind == b"dom_contains")
                };
                if result == check.passed {
                    Vec::new()
                } else {
                    [
                        &b"check "[..],
                        &repr(&check.check_id),
                        b" recomputes ",
                        py_bool(result),
                        b", recorded ",
                        py_bool(check.passed),
                    ]
                    .concat()
                }
            }
        };
        verdict.checks.push(CheckVerdict {
            check_id: check.check_id.clone(),
            ok: reason.is_empty(),
            passed: check.passed,
            reason: reason.clone(),
        });
        if !reason.is_empty() {
            checks_ok = false;
            if verdict.reason.is_empty() {
                verdict.reason = reason;
            }
        }
    }
    verdict.ok = steps_ok && verdict.head_anchor_ok && checks_ok;
    Ok(verdict)
}

/// `_parse_flow`: `(head_anchor, steps, checks)`, raising as `BrowserFlowReport.from_json`
/// does. Every step is parsed before any check.
fn parse_flow(report: &PyValue<'_>) -> Result<Flow, Raised> {
    let mut steps = Vec::new();
    for raw in dicts(report.get("steps")) {
        steps.push(Step {
            action_kind: field(raw, "action_kind").into_owned(),
            action_target: field(raw, "action_target").into_owned(),
            action_value_digest: field(raw, "action_value_digest").into_owned(),
            screenshot_content_hash: field(raw, "screenshot_content_hash").into_owned(),
            dom_content_hash: field(raw, "dom_content_hash").into_owned(),
            dom_digest: field(raw, "dom_digest").into_owned(),
            observation_hash: field(raw, "observation_hash").into_owned(),
            prev_anchor: field(raw, "prev_anchor").into_owned(),
            anchor: field(raw, "anchor").into_owned(),
            index: py_int(raw.get("index"))?,
        });
    }
    let mut checks = Vec::new();
    for raw in dicts(report.get("checks")) {
        // `CheckKind(str(row.get("kind", CheckKind.DOM_CONTAINS)))`, a StrEnum: a check
        // without a kind is a `dom_contains` one.
        let kind = match raw.get("kind") {
            None => b"dom_contains".to_vec(),
            Some(_) => field(raw, "kind").into_owned(),
        };
        if !CHECK_KINDS.contains(&kind.as_slice()) {
            return Err(VALUE_ERROR);
        }
        checks.push(Check {
            check_id: field(raw, "check_id").into_owned(),
            kind,
            operand: field(raw, "operand").into_owned(),
            step_index: py_int(raw.get("step_index"))?,
            passed: truthy(raw.get("passed")),
        });
    }
    Ok(Flow {
        head_anchor: field(report, "head_anchor").into_owned(),
        steps,
        checks,
    })
}

/// What replaying a step gives: `norm()` of the DOM it left, or why it does not replay.
enum Replayed {
    Dom(Vec<u8>),
    Failed(Vec<u8>),
}

/// `_replay_step`; `Err` when computing the step's anchor raises.
fn replay_step(n: usize, step: &Step, prev: &[u8], store: &dyn Store) -> Result<Replayed, Crash> {
    let fail = |what: &[u8]| {
        let reason = [format!("step {n}: ").as_bytes(), what].concat();
        Ok(Replayed::Failed(reason))
    };
    if step.prev_anchor != prev {
        return fail(b"broken chain link");
    }
    if let Some(crash) = lookup_raises(&step.screenshot_content_hash) {
        return Err(crash);
    }
    let screenshot = match pinned_bytes(store, "screenshot", &step.screenshot_content_hash) {
        Ok(data) => data,
        Err(why) => return fail(&why),
    };
    if let Some(crash) = lookup_raises(&step.dom_content_hash) {
        return Err(crash);
    }
    let dom = match pinned_bytes(store, "dom", &step.dom_content_hash) {
        Ok(data) => norm(&data),
        Err(why) => return fail(&why),
    };
    let dom_digest = sha256_hex(&dom);
    if dom_digest[..] != step.dom_digest {
        return fail(b"dom digest mismatch");
    }
    let observation = sha256_hex(&[&screenshot[..], &dom_digest].concat());
    if observation[..] != step.observation_hash {
        return fail(b"observation hash mismatch");
    }
    if !ACTION_KINDS.contains(&step.action_kind.as_slice()) {
        return fail(&[&b"unknown action kind "[..], &repr(&step.action_kind)].concat());
    }
    let anchor_doc = encode_utf8(anchor_doc(step, &observation, prev))?;
    if sha256_hex(&anchor_doc)[..] != step.anchor {
        return fail(b"anchor mismatch");
    }
    Ok(Replayed::Dom(dom))
}

/// The bytes the store holds for `pinned`, which must hash to it.
fn pinned_bytes<'s>(
    store: &'s dyn Store,
    label: &str,
    pinned: &[u8],
) -> Result<Cow<'s, [u8]>, Vec<u8>> {
    let Some(data) = store.get(pinned) else {
        let why = format!("{label} bytes missing from store for ");
        return Err([why.as_bytes(), &repr(pinned)].concat());
    };
    if content_hash(&data) != pinned {
        return Err(format!("{label} content hash mismatch").into_bytes());
    }
    Ok(data)
}

/// `json.dumps(anchor_doc, ensure_ascii=False, separators=(",", ":"), sort_keys=True)`,
/// as WTF-8: a lone surrogate is kept (`acanon`'s `.encode("utf-8")` then refuses it).
fn anchor_doc(step: &Step, observation: &[u8], prev: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(320);
    out.extend_from_slice(b"{\"action\":{\"kind\":");
    write_json_str(&step.action_kind, &mut out);
    out.extend_from_slice(b",\"target\":");
    write_json_str(&step.action_target, &mut out);
    out.extend_from_slice(b",\"value_digest\":");
    write_json_str(&step.action_value_digest, &mut out);
    out.extend_from_slice(b"},\"observation_hash\":");
    write_json_str(observation, &mut out);
    out.extend_from_slice(b",\"prev_anchor\":");
    write_json_str(prev, &mut out);
    out.push(b'}');
    out
}

/// `norm()`: the pieces between runs of ASCII whitespace, joined by single spaces.
pub(super) fn norm(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(data.len());
    for piece in data
        .split(|b| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c))
        .filter(|piece| !piece.is_empty())
    {
        if !out.is_empty() {
            out.push(b' ');
        }
        out.extend_from_slice(piece);
    }
    out
}

/// `str()` of a Python bool.
fn py_bool(value: bool) -> &'static [u8] {
    if value {
        b"True"
    } else {
        b"False"
    }
}

/// `bool(value)`; a missing value is `None`.
pub(super) fn truthy(value: Option<&PyValue<'_>>) -> bool {
    match value {
        None | Some(PyValue::Null) => false,
        Some(PyValue::Bool(b)) => *b,
        Some(PyValue::Int(digits)) => digits != "0",
        Some(PyValue::Float(x)) => *x != 0.0,
        Some(PyValue::Str(s)) => !s.is_empty(),
        Some(PyValue::Array(items)) => !items.is_empty(),
        Some(PyValue::Object(members)) => !members.is_empty(),
    }
}

/// Where `steps[index]` looks in a list of `len` items (negative indexes count from the
/// end), or the `IndexError` it raises.
pub(super) fn list_position(index: &str, len: usize) -> Result<usize, Crash> {
    let Ok(index) = index.parse::<i64>() else {
        return Err(Crash(
            "IndexError: cannot fit 'int' into an index-sized integer".into(),
        ));
    };
    let position = if index < 0 { index + len as i64 } else { index };
    if (0..len as i64).contains(&position) {
        Ok(position as usize)
    } else {
        Err(Crash("IndexError: list index out of range".into()))
    }
}

/// `int(value)` (missing: `-1`) as normalized decimal text.
pub(super) fn py_int(value: Option<&PyValue<'_>>) -> Result<String, Raised> {
    match value {
        None => Ok("-1".into()),
        Some(PyValue::Int(digits)) => Ok(digits.to_string()),
        Some(PyValue::Bool(b)) => Ok(if *b { "1" } else { "0" }.into()),
        Some(PyValue::Float(x)) => float_int(*x),
        Some(PyValue::Str(s)) => str_int(s).ok_or(VALUE_ERROR),
        Some(PyValue::Null | PyValue::Array(_) | PyValue::Object(_)) => Err(TYPE_ERROR),
    }
}

/// `int(x)` of a float: truncated toward zero, exactly.
fn float_int(x: f64) -> Result<String, Raised> {
    if x.is_nan() {
        return Err(VALUE_ERROR);
    }
    if x.is_infinite() {
        return Err(Raised::Uncaught(Crash(
            "OverflowError: cannot convert float infinity to integer".into(),
        )));
    }
    let whole = x.trunc();
    if whole.abs() < 9.0e18 {
        return Ok((whole as i64).to_string());
    }
    // |x| >= 2^53: an integer, mantissa * 2^exponent with exponent > 0.
    let bits = whole.to_bits();
    let exponent = ((bits >> 52) & 0x7FF) as u32 - 1075;
    let mantissa = (bits & ((1u64 << 52) - 1)) | (1u64 << 52);
    // Little-endian limbs of nine decimal digits.
    const BASE: u64 = 1_000_000_000;
    let mut limbs = vec![
        mantissa % BASE,
        mantissa / BASE % BASE,
        mantissa / BASE / BASE,
    ];
    let mut left = exponent;
    while left > 0 {
        let shift = left.min(32);
        left -= shift;
        let mut carry = 0u64;
        for limb in &mut limbs {
            let value = (*limb << shift) + carry;
            *limb = value % BASE;
            carry = value / BASE;
        }
        while carry > 0 {
            limbs.push(carry % BASE);
            carry /= BASE;
        }
    }
    while limbs.len() > 1 && limbs.last() == Some(&0) {
        limbs.pop();
    }
    let mut text = if x < 0.0 {
        "-".to_owned()
    } else {
        String::new()
    };
    let mut rest = limbs.iter().rev();
    if let Some(top) = rest.next() {
        text.push_str(&top.to_string());
    }
    for limb in rest {
        text.push_str(&format!("{limb:09}"));
    }
    Ok(text)
}

/// The code points `str.isspace()` holds beyond ASCII (Unicode 14.0, CPython 3.11).
const UNICODE_SPACES: [u32; 19] = [
    0x85, 0xA0, 0x1680, 0x2000, 0x2001, 0x2002, 0x2003, 0x2004, 0x2005, 0x2006, 0x2007, 0x2008,
    0x2009, 0x200A, 0x2028, 0x2029, 0x202F, 0x205F, 0x3000,
];

/// The first code point (the zero) of every run of ten Unicode decimal digits (category
/// Nd) beyond ASCII, Unicode 14.0 as in CPython 3.11: `unicodedata.decimal` is
/// `code - start` within each run.
const DECIMAL_ZEROS: [u32; 65] = [
    0x660, 0x6F0, 0x7C0, 0x966, 0x9E6, 0xA66, 0xAE6, 0xB66, 0xBE6, 0xC66, 0xCE6, 0xD66, 0xDE6,
    0xE50, 0xED0, 0xF20, 0x1040, 0x1090, 0x17E0, 0x1810, 0x1946, 0x19D0, 0x1A80, 0x1A90, 0x1B50,
    0x1BB0, 0x1C40, 0x1C50, 0xA620, 0xA8D0, 0xA900, 0xA9D0, 0xA9F0, 0xAA50, 0xABF0, 0xFF10,
    0x104A0, 0x10D30, 0x11066, 0x110F0, 0x11136, 0x111D0, 0x112F0, 0x11450, 0x114D0, 0x11650,
    0x116C0, 0x11730, 0x118E0, 0x11950, 0x11C50, 0x11D50, 0x11DA0, 0x16A60, 0x16AC0, 0x16B50,
    0x1D7CE, 0x1D7D8, 0x1D7E2, 0x1D7EC, 0x1D7F6, 0x1E140, 0x1E2F0, 0x1E950, 0x1FBF0,
];

/// `int(s)` of a string as normalized decimal text, `None` where Python raises
/// `ValueError`. As CPython does: non-ASCII whitespace becomes a space and Unicode digits
/// their ASCII digit (any other non-ASCII character ends the text as an invalid `?`);
/// then ASCII whitespace around, one sign, digits with single underscores between them,
/// at most 4300 digits (`sys.int_info.default_max_str_digits`).
pub(super) fn str_int(s: &[u8]) -> Option<String> {
    let mut ascii = Vec::with_capacity(s.len());
    for code in code_points(s) {
        if code < 0x7F {
            ascii.push(code as u8);
        } else if UNICODE_SPACES.contains(&code) {
            ascii.push(b' ');
        } else {
            let zero = DECIMAL_ZEROS
                .iter()
                .rev()
                .find(|&&zero| zero <= code && code < zero + 10)?;
            ascii.push(b'0' + (code - zero) as u8);
        }
    }
    let is_space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | b'\r' | 0x0b | 0x0c);
    let start = ascii.iter().position(|b| !is_space(b))?;
    let end = ascii.iter().rposition(|b| !is_space(b))? + 1;
    let mut text = &ascii[start..end];
    let negative = text.first() == Some(&b'-');
    if let Some(b'+' | b'-') = text.first() {
        text = &text[1..];
    }
    let mut digits = String::with_capacity(text.len());
    let mut prev = b'_';
    for &b in text {
        match b {
            b'0'..=b'9' => digits.push(b as char),
            b'_' if prev != b'_' => {}
            _ => return None,
        }
        prev = b;
    }
    if digits.is_empty() || prev == b'_' || digits.len() > crate::pyjson::MAX_INT_DIGITS {
        return None;
    }
    let significant = digits.trim_start_matches('0');
    Some(match significant {
        "" => "0".to_owned(),
        _ if negative => format!("-{significant}"),
        _ => significant.to_owned(),
    })
}
