"""The reference's evidence digest, byte for byte.

The reference hashes ``JSON.stringify(sortObjectKeys(payload))`` with SHA-256 over the
UTF-8 bytes, where ``sortObjectKeys`` re-inserts every object's keys in ``localeCompare``
order, recursively; arrays keep their order. This is *not* RFC 8785: strings are escaped
the way ``JSON.stringify`` escapes them (non-ASCII stays literal UTF-8, only ``"``, ``\\``
and C0 controls are escaped, lone surrogates become ``\\udxxx``), numbers are printed as
JavaScript prints them, and keys that look like array indices come first because that is
how JavaScript objects order their own keys.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping
from decimal import Decimal
from typing import Any

from agentledger.phase.jscompat import locale_sort_key, to_js_string

__all__ = [
    "DIGEST_PREFIX",
    "evidence_digest",
    "js_json_number",
    "js_json_string",
    "sha256_digest",
    "stable_stringify",
    "verify_evidence_digest",
]

DIGEST_PREFIX = "sha256:"

_SHORT_ESCAPES = {
    '"': '\\"',
    "\\": "\\\\",
    "\b": "\\b",
    "\f": "\\f",
    "\n": "\\n",
    "\r": "\\r",
    "\t": "\\t",
}
_MAX_ARRAY_INDEX = 2**32 - 2
_MAX_SAFE_INTEGER = 2**53


def js_json_string(value: str) -> str:
    """``JSON.stringify(value)`` for a string (ES2019 well-formed stringify)."""
    out = ['"']
    for ch in to_js_string(value):
        code = ord(ch)
        if ch in _SHORT_ESCAPES:
            out.append(_SHORT_ESCAPES[ch])
        elif code < 0x20 or 0xD800 <= code <= 0xDFFF:
            out.append(f"\\u{code:04x}")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


def js_json_number(value: int | float) -> str:
    """``JSON.stringify(value)`` for a number (``Number.prototype.toString``, NaN/∞ → null)."""
    if isinstance(value, int):
        if abs(value) <= _MAX_SAFE_INTEGER:
            return str(value)
        value = float(value)  # what JSON.parse would have made of it
    if not math.isfinite(value):
        return "null"
    if value == 0:
        return "0"  # also -0
    sign = "-" if value < 0 else ""
    _, digit_tuple, exponent = Decimal(repr(abs(value))).as_tuple()
    assert isinstance(exponent, int)
    # repr() gives the shortest round-tripping digits, as ECMAScript requires; only the
    # layout differs. n is the decimal point position relative to the digit string.
    all_digits = "".join(map(str, digit_tuple))
    n = exponent + len(all_digits)
    digits = all_digits.rstrip("0")
    k = len(digits)
    if k <= n <= 21:
        text = digits + "0" * (n - k)
    elif 0 < n <= 21:
        text = digits[:n] + "." + digits[n:]
    elif -6 < n <= 0:
        text = "0." + "0" * (-n) + digits
    else:
        power = n - 1
        mantissa = digits if k == 1 else digits[0] + "." + digits[1:]
        text = f"{mantissa}e{'+' if power >= 0 else '-'}{abs(power)}"
    return sign + text


def _is_array_index(key: str) -> bool:
    return (
        key.isascii()
        and key.isdigit()
        and (key == "0" or not key.startswith("0"))
        and int(key) <= _MAX_ARRAY_INDEX
    )


def _ordered_keys(obj: Mapping[str, Any]) -> list[str]:
    keys = list(obj)
    for key in keys:
        if not isinstance(key, str):
            raise TypeError(f"object keys must be strings, got {type(key).__name__}")
    indices = sorted((key for key in keys if _is_array_index(key)), key=int)
    named = sorted((key for key in keys if not _is_array_index(key)), key=locale_sort_key)
    return indices + named


def stable_stringify(value: Any) -> str:
    """``JSON.stringify`` of the value with object keys sorted recursively (compact)."""
    parts: list[str] = []
    _write(value, parts)
    return "".join(parts)


def _write(value: Any, parts: list[str]) -> None:
    if value is None:
        parts.append("null")
    elif value is True:
        parts.append("true")
    elif value is False:
        parts.append("false")
    elif isinstance(value, str):
        parts.append(js_json_string(value))
    elif isinstance(value, int | float):
        parts.append(js_json_number(value))
    elif isinstance(value, Mapping):
        parts.append("{")
        for index, key in enumerate(_ordered_keys(value)):
            if index:
                parts.append(",")
            parts.append(js_json_string(key))
            parts.append(":")
            _write(value[key], parts)
        parts.append("}")
    elif isinstance(value, list | tuple):
        parts.append("[")
        for index, item in enumerate(value):
            if index:
                parts.append(",")
            _write(item, parts)
        parts.append("]")
    else:
        raise TypeError(f"cannot serialise {type(value).__name__} as JSON")


def sha256_digest(value: Any) -> str:
    """``"sha256:" + hex(SHA-256(UTF-8(stable_stringify(value))))``."""
    data = stable_stringify(value).encode("utf-8")
    return DIGEST_PREFIX + hashlib.sha256(data).hexdigest()


def evidence_digest(evidence: Mapping[str, Any]) -> str:
    """The digest of an evidence object: every field except ``digest`` itself."""
    return sha256_digest({key: item for key, item in evidence.items() if key != "digest"})


def verify_evidence_digest(evidence: Mapping[str, Any]) -> bool:
    """True when the evidence's ``digest`` field is the digest of its other fields."""
    return evidence.get("digest") == evidence_digest(evidence)
