//! Python 3.11's base64 decoding as `reports.py` uses it, errors and all:
//! `binascii.a2b_base64` in both modes, `base64.urlsafe_b64decode` of the re-padded
//! signature, and the PEM block `_public_key_der` reads.

use memchr::memmem;

const PAD: u8 = b'=';

/// The value of a digit of the standard alphabet.
fn digit(b: u8) -> Option<u8> {
    match b {
        b'A'..=b'Z' => Some(b - b'A'),
        b'a'..=b'z' => Some(b - b'a' + 26),
        b'0'..=b'9' => Some(b - b'0' + 52),
        b'+' => Some(62),
        b'/' => Some(63),
        _ => None,
    }
}

/// `binascii.a2b_base64(data, strict_mode=strict)`; the error is the `binascii.Error`
/// text. Not strict: bytes outside the alphabet are skipped, and the first `=` that
/// completes a quad (from its third digit on) ends the input. Strict: those are errors,
/// as are a leading `=`, anything after the `=` that ends the input and digits after any
/// other `=` (a `=` at the start of a quad is still skipped). Neither mode checks that
/// the bits a final digit leaves over are zero.
pub(super) fn a2b_base64(data: &[u8], strict: bool) -> Result<Vec<u8>, String> {
    if strict && data.first() == Some(&PAD) {
        return Err("Leading padding not allowed".into());
    }
    let mut out = Vec::with_capacity(data.len().div_ceil(4) * 3);
    let mut quad_pos = 0u32;
    let mut leftchar = 0u8;
    let mut pads = 0u32;
    let mut padding_started = false;
    for (i, &b) in data.iter().enumerate() {
        if b == PAD {
            padding_started = true;
            if quad_pos >= 2 {
                pads += 1;
                if quad_pos + pads >= 4 {
                    if strict && i + 1 < data.len() {
                        return Err("Excess data after padding".into());
                    }
                    return Ok(out);
                }
            }
            continue;
        }
        let Some(v) = digit(b) else {
            if strict {
                return Err("Only base64 data is allowed".into());
            }
            continue;
        };
        if strict && padding_started {
            return Err("Discontinuous padding not allowed".into());
        }
        pads = 0;
        match quad_pos {
            0 => {
                quad_pos = 1;
                leftchar = v;
            }
            1 => {
                quad_pos = 2;
                out.push((leftchar << 2) | (v >> 4));
                leftchar = v & 0x0F;
            }
            2 => {
                quad_pos = 3;
                out.push((leftchar << 4) | (v >> 2));
                leftchar = v & 0x03;
            }
            _ => {
                quad_pos = 0;
                out.push((leftchar << 6) | v);
                leftchar = 0;
            }
        }
    }
    match quad_pos {
        0 => Ok(out),
        1 => Err(format!(
            "Invalid base64-encoded string: number of data characters ({}) cannot be 1 more \
             than a multiple of 4",
            out.len() / 3 * 4 + 1
        )),
        _ => Err("Incorrect padding".into()),
    }
}

/// `base64.urlsafe_b64decode(s + "=" * (-len(s) % 4))` of a `str` (WTF-8): text that
/// is not ASCII is a `ValueError`; `-` and `_` read as `+` and `/` (which are kept), and
/// the rest is the lenient [`a2b_base64`].
pub(super) fn urlsafe_b64decode_padded(s: &[u8]) -> Result<Vec<u8>, String> {
    if !s.is_ascii() {
        return Err("string argument should contain only ASCII characters".into());
    }
    let mut text: Vec<u8> = s
        .iter()
        .map(|&b| match b {
            b'-' => b'+',
            b'_' => b'/',
            other => other,
        })
        .collect();
    text.resize(s.len().next_multiple_of(4), PAD);
    a2b_base64(&text, false)
}

const BEGIN: &[u8] = b"-----BEGIN PUBLIC KEY-----";
const END: &[u8] = b"-----END PUBLIC KEY-----";

/// Python's `str.isspace()` (which is also what `\s` and `str.split()` take as space).
pub(super) fn is_space(code: u32) -> bool {
    matches!(
        code,
        0x09..=0x0D
            | 0x1C..=0x20
            | 0x85
            | 0xA0
            | 0x1680
            | 0x2000..=0x200A
            | 0x2028
            | 0x2029
            | 0x202F
            | 0x205F
            | 0x3000
    )
}

/// The code point at the start of WTF-8 `s`, and its length in bytes.
fn first_code_point(s: &[u8]) -> Option<(u32, usize)> {
    let lead = *s.first()?;
    let (len, init) = match lead {
        0..=0x7F => return Some((u32::from(lead), 1)),
        0xC0..=0xDF => (2, u32::from(lead & 0x1F)),
        0xE0..=0xEF => (3, u32::from(lead & 0x0F)),
        _ => (4, u32::from(lead & 0x07)),
    };
    let tail = s.get(1..len)?;
    Some((
        tail.iter()
            .fold(init, |code, &b| (code << 6) | u32::from(b & 0x3F)),
        len,
    ))
}

/// `_public_key_der`: the first match of
/// `-----BEGIN PUBLIC KEY-----\s*([A-Za-z0-9+/=\s]*?)\s*-----END PUBLIC KEY-----` in the
/// text, its group stripped of every space and read by `base64.b64decode(validate=True)`
/// (strict); `None` when nothing matches or the body does not decode.
///
/// The body can hold no `-`, so a `BEGIN` line matches exactly when the longest run of
/// body characters after it is followed by the `END` line; the lines may overlap
/// (`-----BEGIN PUBLIC KEY-----BEGIN …`), so every start is tried.
pub(super) fn public_key_der(pem: &[u8]) -> Option<Vec<u8>> {
    let mut from = 0;
    while let Some(found) = memmem::find(&pem[from..], BEGIN) {
        let start = from + found;
        let mut i = start + BEGIN.len();
        let mut body = Vec::new();
        while let Some(&b) = pem.get(i) {
            if b.is_ascii_alphanumeric() || matches!(b, b'+' | b'/' | b'=') {
                body.push(b);
                i += 1;
                continue;
            }
            match first_code_point(&pem[i..]) {
                Some((code, len)) if is_space(code) => i += len,
                _ => break,
            }
        }
        if pem[i..].starts_with(END) {
            return a2b_base64(&body, true).ok();
        }
        from = start + 1;
    }
    None
}
