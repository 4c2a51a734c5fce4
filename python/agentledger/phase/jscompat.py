"""JavaScript string semantics the reference compiler relies on, reproduced exactly.

The reference compiler is TypeScript. Where JavaScript and Python disagree about a
string operation, the evidence (and so its digest) would differ, so every such
operation used by the phase compiler goes through this module:

- ``String.prototype.trim`` strips a different whitespace set than ``str.strip``
  (JavaScript strips U+FEFF and keeps U+0085 and U+001C..U+001F; Python does the opposite).
- ``.length`` counts UTF-16 code units, so an astral character counts twice.
- JavaScript strings are UTF-16; a surrogate pair that Python holds as two code points
  is one character in JavaScript.
- ``Array.prototype.sort()`` without a comparator orders by UTF-16 code units, while
  ``localeCompare`` uses ICU root collation (case and punctuation aware).
"""

from __future__ import annotations

from functools import cmp_to_key

__all__ = [
    "has_control_characters",
    "js_locale_compare",
    "js_trim",
    "locale_sort_key",
    "to_js_string",
    "utf16_length",
    "utf16_sort_key",
]

# ECMAScript WhiteSpace + LineTerminator (ECMA-262 §12.2, §12.3): TAB, VT, FF, SP, NBSP,
# ZWNBSP (U+FEFF) and every Zs character, plus LF, CR, LS, PS. U+0085 and U+180E are not in it.
_JS_WHITESPACE = frozenset(
    "\t\n\v\f\r \u00a0\u1680"
    "\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u2028\u2029\u202f\u205f\u3000\ufeff"
)


def to_js_string(value: str) -> str:
    """The string JavaScript would hold: adjacent surrogate code points become one character.

    Python can hold a high and a low surrogate as two separate code points; in JavaScript
    that sequence *is* the astral character. Lone surrogates are kept as they are.
    """
    if not any("\ud800" <= ch <= "\udfff" for ch in value):
        return value
    return value.encode("utf-16-le", "surrogatepass").decode("utf-16-le", "surrogatepass")


def js_trim(value: str) -> str:
    """``String.prototype.trim``: strip ECMAScript whitespace and line terminators."""
    start, end = 0, len(value)
    while start < end and value[start] in _JS_WHITESPACE:
        start += 1
    while end > start and value[end - 1] in _JS_WHITESPACE:
        end -= 1
    return value[start:end]


def utf16_length(value: str) -> int:
    """``String.prototype.length``: the number of UTF-16 code units."""
    return len(value) + sum(1 for ch in value if ord(ch) > 0xFFFF)


def has_control_characters(value: str) -> bool:
    """True when a character is C0 (code <= 31) or DEL (127); C1 controls such as U+0085 pass."""
    return any(ord(ch) <= 31 or ord(ch) == 127 for ch in value)


def utf16_sort_key(value: str) -> bytes:
    """A key that orders strings as ``Array.prototype.sort()`` does (by UTF-16 code units)."""
    return to_js_string(value).encode("utf-16-be", "surrogatepass")


# ICU root collation (CLDR, alternate=non-ignorable, strength=tertiary) for ASCII, taken
# from Node's ``localeCompare``. Every printable ASCII character has its own primary weight
# in this order, except that a letter and its capital share one; the capital sorts after the
# small letter at the tertiary level. Other C0 controls and DEL are completely ignorable.
_PRIMARY_ORDER = "\t\n\v\f\r _-,;:!?.'\"()[]{}@*/\\&#%`^+<=>|~$0123456789abcdefghijklmnopqrstuvwxyz"
_PRIMARY = {ch: index + 1 for index, ch in enumerate(_PRIMARY_ORDER)}
_PRIMARY.update({ch.upper(): _PRIMARY[ch] for ch in "abcdefghijklmnopqrstuvwxyz"})


def _collation_elements(value: str) -> tuple[list[int], list[int]]:
    primary: list[int] = []
    tertiary: list[int] = []
    for ch in value:
        weight = _PRIMARY.get(ch)
        if weight is None:
            if ord(ch) < 32 or ord(ch) == 127:
                continue  # ignorable at every level
            raise ValueError(
                f"locale comparison is only reproduced for ASCII; got {ch!r} (U+{ord(ch):04X})"
            )
        primary.append(weight)
        tertiary.append(1 if "A" <= ch <= "Z" else 0)
    return primary, tertiary


def js_locale_compare(left: str, right: str) -> int:
    """``left.localeCompare(right)`` under ICU root collation, for ASCII strings.

    Returns -1, 0 or 1. Raises ``ValueError`` for characters outside ASCII rather than
    guessing: the compiler only compares identifiers, dimensions and codes, all ASCII.
    """
    left_primary, left_tertiary = _collation_elements(left)
    right_primary, right_tertiary = _collation_elements(right)
    if left_primary != right_primary:
        return -1 if left_primary < right_primary else 1
    if left_tertiary != right_tertiary:
        return -1 if left_tertiary < right_tertiary else 1
    return 0


locale_sort_key = cmp_to_key(js_locale_compare)
