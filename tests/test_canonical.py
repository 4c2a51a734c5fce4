"""RFC 8785 canonical JSON: the public vectors, an oracle, and every refusal."""

from __future__ import annotations

import collections
import decimal
import enum
import hashlib
import itertools
import json
import math
import re
import struct
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from agentledger._core import MAX_DEPTH, CanonicalizationError, canonicalize, canonicalize_json
from tests import jcs_oracle

VECTORS = Path(__file__).parent / "vectors" / "jcs-rfc8785"
VECTOR_NAMES = ["arrays", "french", "structures", "unicode", "values", "weird"]
MAX_SAFE_INTEGER = 2**53 - 1


def vector(name: str) -> tuple[bytes, bytes]:
    """(input text, expected canonical bytes); the output file is checked against outhex."""
    expected = (VECTORS / "output" / f"{name}.json").read_bytes()
    outhex = bytes.fromhex((VECTORS / "outhex" / f"{name}.txt").read_text())
    assert expected == outhex
    return (VECTORS / "input" / f"{name}.json").read_bytes(), expected


# ---- the RFC 8785 vectors ----------------------------------------------------------------


@pytest.mark.parametrize("name", VECTOR_NAMES)
def test_vector_text_canonicalizes_to_expected_bytes(name: str) -> None:
    text, expected = vector(name)
    assert canonicalize_json(text) == expected
    assert canonicalize_json(text.decode("utf-8")) == expected


@pytest.mark.parametrize("name", VECTOR_NAMES)
def test_vector_value_canonicalizes_to_expected_bytes(name: str) -> None:
    text, expected = vector(name)
    assert canonicalize(json.loads(text)) == expected


@pytest.mark.parametrize("name", VECTOR_NAMES)
def test_oracle_reproduces_the_vectors(name: str) -> None:
    text, expected = vector(name)
    assert jcs_oracle.canonicalize(json.loads(text)) == expected


def test_keys_sort_by_utf16_code_units_not_code_points() -> None:
    # U+1F602 is the surrogate pair D83D DE02 in UTF-16, below U+FB33.
    value = {"\ufb33": 1, "\U0001f602": 2, "\ue000": 3, "\ud7ff": 4}
    expected = '{"\ud7ff":4,"\U0001f602":2,"\ue000":3,"\ufb33":1}'.encode()
    assert canonicalize(value) == expected
    assert jcs_oracle.canonicalize(value) == expected
    assert canonicalize_json(json.dumps(value)) == expected


# ---- numbers ---------------------------------------------------------------------------

NUMBER_CASES = [
    (0.0, "0"),
    (-0.0, "0"),
    (1.0, "1"),
    (-1.5, "-1.5"),
    (1e21, "1e+21"),
    (1e20, "100000000000000000000"),
    (1e-6, "0.000001"),
    (1e-7, "1e-7"),
    (1.5e-7, "1.5e-7"),
    (1e30, "1e+30"),
    (333333333.3333333, "333333333.3333333"),
    (2.0**60, "1152921504606847000"),
    (9007199254740994.0, "9007199254740994"),
    (9.999999999999997e-7, "9.999999999999997e-7"),
    (1.7976931348623157e308, "1.7976931348623157e+308"),
    (5e-324, "5e-324"),
    (-5e-324, "-5e-324"),
    (2.2250738585072014e-308, "2.2250738585072014e-308"),
]


@pytest.mark.parametrize(("x", "expected"), NUMBER_CASES)
def test_float_prints_as_ecmascript_number_to_string(x: float, expected: str) -> None:
    assert canonicalize(x) == expected.encode()
    assert jcs_oracle.format_number(x) == expected


def test_integers_print_as_plain_digits_and_bools_stay_bools() -> None:
    assert canonicalize([True, 1, False, 0, -7, MAX_SAFE_INTEGER]) == (
        b"[true,1,false,0,-7,9007199254740991]"
    )
    assert canonicalize(-MAX_SAFE_INTEGER) == b"-9007199254740991"
    assert canonicalize(5) == canonicalize(5.0) == b"5"


def es6_test_file_lines() -> Iterator[str]:
    """The ES6 number test file generator of tests/vectors/jcs-rfc8785/README.md."""
    readme = (VECTORS / "README.md").read_text()
    static_block = readme[readme.index("staticU64s") : readme.index("])")]
    static = [int(h, 16) for h in re.findall(r"0x([0-9a-f]+)n", static_block)]
    assert len(static) == 168
    serial = [0x0010000000000000 + i for i in range(2000)]
    for u in itertools.chain(static, serial, sha256_chain_bits()):
        x = struct.unpack("<d", struct.pack("<Q", u))[0]
        yield f"{u:x},{canonicalize(x).decode()}\n"


def sha256_chain_bits() -> Iterator[int]:
    """Doubles read 4 per block from SHA-256 chained over 32 bytes, zeros and non-finite skipped."""
    block = bytes(32)
    while True:
        block = hashlib.sha256(block).digest()
        for (x,) in struct.iter_unpack("<d", block):
            if x != 0.0 and math.isfinite(x):
                yield struct.unpack("<Q", struct.pack("<d", x))[0]


def test_es6_number_test_file_checksums_hold_through_the_python_binding() -> None:
    # The million-line checksum runs in the Rust release tests; these are the cheap ones.
    checksums = {
        1000: "be18b62b6f69cdab33a7e0dae0d9cfa869fda80ddc712221570f9f40a5878687",
        10000: "b9f7a8e75ef22a835685a52ccba7f7d6bdc99e34b010992cbc5864cd12be6892",
    }
    digest = hashlib.sha256()
    for count, line in enumerate(es6_test_file_lines(), start=1):
        digest.update(line.encode())
        if count in checksums:
            assert digest.hexdigest() == checksums[count], count
        if count == max(checksums):
            break


def test_readme_sample_lines_format_as_published() -> None:
    samples = {
        "4340000000000001": "9007199254740994",
        "4340000000000002": "9007199254740996",
        "444b1ae4d6e2ef50": "1e+21",
        "3eb0c6f7a0b5ed8d": "0.000001",
        "3eb0c6f7a0b5ed8c": "9.999999999999997e-7",
        "8000000000000000": "0",
        "0": "0",
    }
    for hex_bits, expected in samples.items():
        x = struct.unpack(">d", int(hex_bits, 16).to_bytes(8, "big"))[0]
        assert canonicalize(x) == expected.encode(), hex_bits
        assert jcs_oracle.format_number(x) == expected, hex_bits


# ---- strings ---------------------------------------------------------------------------


def test_strings_escape_only_quote_backslash_and_control_characters() -> None:
    value = 'a"b\\c/\b\t\n\f\r\x00\x1f\x7f\u2028é😂'
    expected = '"a\\"b\\\\c/\\b\\t\\n\\f\\r\\u0000\\u001f\x7f\u2028é😂"'.encode()
    assert canonicalize(value) == expected
    assert canonicalize_json(json.dumps(value)) == expected


def test_huge_string_canonicalizes() -> None:
    big = "ab\u00e9" * (50 * 1024 * 1024 // 4)  # 50 MiB of UTF-8
    expected = b'"' + big.encode() + b'"'
    assert len(expected) > 50_000_000
    assert canonicalize(big) == expected
    assert canonicalize_json(expected) == expected


# ---- the oracle, on arbitrary values ---------------------------------------------------

# Characters where escaping or UTF-16 key order (surrogate pairs sort before U+E000..U+FFFF)
# can go wrong, mixed with arbitrary ones; never lone surrogates.
BOUNDARY_CHARACTERS = (
    '\x00\x08\x1f "\\/\x7f\x80\xe9\u2028\ud7ff\ue000\ufb33\uffff\U00010000\U0001f602\U0010ffff'
)
json_text = st.text(st.sampled_from(BOUNDARY_CHARACTERS) | st.characters(codec="utf-8"), max_size=8)
json_scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-MAX_SAFE_INTEGER, max_value=MAX_SAFE_INTEGER)
    | st.floats(allow_nan=False, allow_infinity=False)
    | json_text
)
json_values = st.recursive(
    json_scalars,
    lambda children: st.lists(children, max_size=6) | st.dictionaries(json_text, children),
    max_leaves=40,
)


@settings(deadline=None)
@given(json_values)
def test_canonicalize_matches_the_oracle(value: object) -> None:
    assert canonicalize(value) == jcs_oracle.canonicalize(value)


@settings(deadline=None)
@given(json_values)
def test_canonical_bytes_are_a_fixed_point_of_canonicalize_json(value: object) -> None:
    canonical = canonicalize(value)
    assert canonicalize_json(canonical) == canonical


@settings(deadline=None)
@given(json_values, st.booleans(), st.sampled_from([None, 0, 2]))
def test_canonicalize_json_of_any_layout_matches_the_oracle(
    value: object, ensure_ascii: bool, indent: int | None
) -> None:
    text = json.dumps(value, ensure_ascii=ensure_ascii, indent=indent)
    assert canonicalize_json(text.encode()) == jcs_oracle.canonicalize(value)


@settings(max_examples=2000, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False))
def test_every_float_matches_the_oracle_and_round_trips(x: float) -> None:
    text = canonicalize(x)
    assert text.decode() == jcs_oracle.format_number(x)
    assert float(text) == x


# ---- values canonicalize refuses -------------------------------------------------------


@pytest.mark.parametrize("x", [float("nan"), float("inf"), float("-inf")])
def test_non_finite_floats_are_refused(x: float) -> None:
    with pytest.raises(CanonicalizationError):
        canonicalize(x)
    with pytest.raises(CanonicalizationError):
        canonicalize({"k": [x]})


@pytest.mark.parametrize("text", ["\ud800", "a\udc00b", "\udbff\udfff\udfff"])
def test_lone_surrogates_in_strings_are_refused(text: str) -> None:
    with pytest.raises(CanonicalizationError, match="lone surrogate"):
        canonicalize(text)
    with pytest.raises(CanonicalizationError, match="lone surrogate"):
        canonicalize({text: 1})


@pytest.mark.parametrize("n", [2**53, -(2**53), 10**30, -(10**400)])
def test_integers_beyond_2_to_the_53_are_refused(n: int) -> None:
    with pytest.raises(CanonicalizationError, match="2\\*\\*53"):
        canonicalize(n)
    with pytest.raises(CanonicalizationError):
        canonicalize([1, n])


@pytest.mark.parametrize("key", [1, 1.5, None, True, (1,), b"k"])
def test_non_str_keys_are_refused(key: object) -> None:
    with pytest.raises(CanonicalizationError, match="keys must be str") as raised:
        canonicalize({key: 1})
    assert type(key).__name__ in str(raised.value)


class _Opaque:
    pass


@pytest.mark.parametrize(
    "value",
    [
        {1, 2},
        frozenset(),
        b"bytes",
        bytearray(b"x"),
        _Opaque(),
        decimal.Decimal("1.5"),
        1 + 2j,
        range(3),
        {"nested": [object()]},
    ],
)
def test_unsupported_types_are_refused_by_name(value: object) -> None:
    inner = value["nested"][0] if isinstance(value, dict) else value
    with pytest.raises(CanonicalizationError, match=type(inner).__name__):
        canonicalize(value)


def nested_lists(depth: int) -> object:
    value: object = []
    for _ in range(depth - 1):
        value = [value]
    return value


def test_nesting_up_to_max_depth_is_accepted() -> None:
    assert MAX_DEPTH == 128
    assert canonicalize(nested_lists(MAX_DEPTH)) == b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    deep_dict: object = {}
    for _ in range(MAX_DEPTH - 1):
        deep_dict = {"a": deep_dict}
    assert canonicalize(deep_dict).count(b"{") == MAX_DEPTH


def test_nesting_beyond_max_depth_is_refused() -> None:
    with pytest.raises(CanonicalizationError, match="nesting deeper than 128"):
        canonicalize(nested_lists(MAX_DEPTH + 1))
    with pytest.raises(CanonicalizationError, match="nesting deeper than 128"):
        canonicalize(nested_lists(100_000))


def test_self_referencing_containers_are_refused() -> None:
    loop: list[object] = []
    loop.append(loop)
    with pytest.raises(CanonicalizationError, match="nesting"):
        canonicalize(loop)
    cycle: dict[str, object] = {}
    cycle["self"] = [cycle]
    with pytest.raises(CanonicalizationError, match="nesting"):
        canonicalize(cycle)


def test_canonicalization_error_is_a_value_error() -> None:
    assert issubclass(CanonicalizationError, ValueError)
    with pytest.raises(ValueError):
        canonicalize(float("nan"))


# ---- subclasses and sequences ----------------------------------------------------------


class _Color(enum.IntEnum):
    RED = 3


class _Str(str):
    def __str__(self) -> str:
        return "not used"


class _Float(float):
    def __repr__(self) -> str:
        return "not used"


def test_subclasses_and_tuples_serialize_by_their_data() -> None:
    value = collections.OrderedDict(
        [(_Str("b"), (1, _Float(2.5))), ("a", _Color.RED), ("c", _Str("x"))]
    )
    assert canonicalize(value) == b'{"a":3,"b":[1,2.5],"c":"x"}'


# ---- texts canonicalize_json refuses ---------------------------------------------------

REFUSED_TEXTS = [
    # (text, byte position, what the message says)
    (b"", 0, "empty input"),
    (b'{"a":1,"a":2}', 7, "duplicate object key"),
    (b'{"a":1,"\\u0061":2}', 7, "duplicate object key"),
    (b'"\\x"', 1, "invalid escape"),
    (b'"\\u12"', 1, "\\\\u escape"),
    (b'"\\ud800"', 1, "lone high surrogate"),
    (b'"\\udc00"', 1, "lone low surrogate"),
    (b'"\\ud800\\u0041"', 1, "lone high surrogate"),
    (b'["ok", "\xff"]', 8, "invalid UTF-8"),
    (b'"\xc3\x28"', 1, "invalid UTF-8"),
    (b"{} x", 3, "trailing data"),
    (b"[1] [2]", 4, "trailing data"),
    (b"NaN", 0, "NaN"),
    (b"[Infinity]", 1, "Infinity"),
    (b"-Infinity", 0, "-Infinity"),
    (b"1e400", 0, "out of the range"),
    (b"[-1e309]", 1, "out of the range"),
    (b"01", 0, "leading zero"),
    (b'"a\nb"', 2, "control character U\\+000A"),
    (b'"\x00"', 1, "control character U\\+0000"),
    (b"[1,]", 3, "where a JSON value was expected"),
    (b'{"a" 1}', 5, "expected ':'"),
    (b"[", 1, "end of input"),
    (b'"abc', 0, "unterminated string"),
]


@pytest.mark.parametrize(("text", "position", "message"), REFUSED_TEXTS)
def test_invalid_json_text_is_refused_with_its_byte_position(
    text: bytes, position: int, message: str
) -> None:
    with pytest.raises(CanonicalizationError, match=message) as raised:
        canonicalize_json(text)
    assert str(raised.value).endswith(f"(at byte {position})")


def test_deeply_nested_text_is_refused_without_crashing() -> None:
    with pytest.raises(CanonicalizationError, match="nesting deeper than 128") as raised:
        canonicalize_json(b"[" * 100_000)
    assert str(raised.value).endswith(f"(at byte {MAX_DEPTH})")
    depth_ok = b"[" * MAX_DEPTH + b"]" * MAX_DEPTH
    assert canonicalize_json(depth_ok) == depth_ok


def test_underflow_to_zero_is_accepted() -> None:
    assert canonicalize_json(b"[1e-400,-1e-400]") == b"[0,0]"


def test_str_input_positions_count_utf8_bytes() -> None:
    with pytest.raises(CanonicalizationError) as raised:
        canonicalize_json('["é", x]')
    assert str(raised.value).endswith("(at byte 7)")


def test_str_input_with_a_lone_surrogate_is_refused() -> None:
    with pytest.raises(CanonicalizationError, match="lone surrogate"):
        canonicalize_json('"\ud800"')


def test_large_text_canonicalizes_and_reports_late_errors() -> None:
    items = [{"i": i, "s": "x" * 50} for i in range(20_000)]
    text = json.dumps(items, indent=1).encode()
    assert len(text) > 1_000_000
    assert canonicalize_json(text) == jcs_oracle.canonicalize(items)
    with pytest.raises(CanonicalizationError) as raised:
        canonicalize_json(text + b"}")
    assert str(raised.value).endswith(f"(at byte {len(text)})")


@pytest.mark.parametrize("data", [bytearray(b"{}"), memoryview(b"{}"), 1, None])
def test_canonicalize_json_takes_only_bytes_or_str(data: object) -> None:
    with pytest.raises(TypeError, match="bytes or str"):
        canonicalize_json(data)  # type: ignore[arg-type]
