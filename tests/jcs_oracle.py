"""A small, slow, obviously-correct RFC 8785 (JCS) serializer to test the Rust one against.

Written from the RFC text, independently of the Rust code: keys sorted by UTF-16 code
units, ECMAScript number formatting derived from Python's shortest round-trip ``repr``,
and the RFC's minimal string escaping.
"""

from __future__ import annotations

import math

MAX_SAFE_INTEGER = 2**53 - 1

_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\t": "\\t",
    "\n": "\\n",
    "\f": "\\f",
    "\r": "\\r",
}


def canonicalize(value: object) -> bytes:
    """RFC 8785 bytes of a JSON-like Python value."""
    return serialize(value).encode("utf-8")


def serialize(value: object) -> str:
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        if abs(value) > MAX_SAFE_INTEGER:
            raise ValueError(f"integer {value} is not exactly representable")
        return str(value)
    if isinstance(value, float):
        return format_number(value)
    if isinstance(value, str):
        return format_string(value)
    if isinstance(value, list | tuple):
        return "[" + ",".join(serialize(item) for item in value) + "]"
    if isinstance(value, dict):
        members = sorted(value.items(), key=lambda item: utf16_sort_key(item[0]))
        return "{" + ",".join(format_string(k) + ":" + serialize(v) for k, v in members) + "}"
    raise TypeError(f"not JSON: {type(value).__name__}")


def utf16_sort_key(key: object) -> bytes:
    """Big-endian UTF-16 bytes compare exactly as the sequence of UTF-16 code units."""
    if not isinstance(key, str):
        raise TypeError("keys must be str")
    return key.encode("utf-16-be")


def format_string(text: str) -> str:
    out = ['"']
    for char in text:
        if char in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[char])
        elif ord(char) < 0x20:
            out.append(f"\\u{ord(char):04x}")
        else:
            out.append(char)
    out.append('"')
    return "".join(out)


def format_number(x: float) -> str:
    """ECMAScript ``Number.prototype.toString`` (ECMA-262 Number::toString, radix 10).

    ``repr`` gives the shortest digits that round-trip (closest to ``x`` on ties), which
    is the digit string ECMAScript asks for; only the layout rules differ.
    """
    if math.isnan(x) or math.isinf(x):
        raise ValueError("NaN and infinities have no JSON form")
    if x == 0:
        return "0"
    sign = "-" if x < 0 else ""
    mantissa, _, exponent_text = repr(abs(x)).partition("e")
    int_part, _, fraction = mantissa.partition(".")
    digits = int_part + fraction
    # value = 0.<digits> * 10**point
    point = len(int_part) + (int(exponent_text) if exponent_text else 0)
    stripped = digits.lstrip("0")
    point -= len(digits) - len(stripped)
    digits = stripped.rstrip("0")
    k, n = len(digits), point
    if k <= n <= 21:
        return sign + digits + "0" * (n - k)
    if 0 < n <= 21:
        return sign + digits[:n] + "." + digits[n:]
    if -6 < n <= 0:
        return sign + "0." + "0" * -n + digits
    exponent = n - 1
    exponent_sign = "+" if exponent >= 0 else "-"
    fraction_part = "." + digits[1:] if k > 1 else ""
    return f"{sign}{digits[0]}{fraction_part}e{exponent_sign}{abs(exponent)}"
