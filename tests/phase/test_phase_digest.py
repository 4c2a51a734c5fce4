"""The evidence digest: JavaScript's JSON.stringify with recursively sorted keys, SHA-256.

Two independent checks. Golden fixtures (``fixtures/*.evidence.json``) were produced by
running the reference algorithm under Node.js 20 (ICU 78), so their digests come from real
``JSON.stringify`` and ``localeCompare``. And a small serializer kept here, written
separately from the package's, recomputes digests of evidence whose keys are all ASCII
lowercase-initial (where locale and code-unit key order agree, which this file checks).
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentledger.phase import compile, evidence_digest, stable_stringify, verify_evidence_digest
from agentledger.phase.digest import js_json_number, js_json_string
from agentledger.phase.jscompat import js_locale_compare, js_trim, utf16_length

from .phase_testkit import FIXTURES, compiler_input, load_fixture, source

GOLDEN = sorted(path.name.removesuffix(".input.json") for path in FIXTURES.glob("*.input.json"))


def oracle_digest(evidence: dict[str, Any]) -> str:
    """Independent: json.dumps matches JSON.stringify for this data once lone surrogates
    are escaped the way JavaScript escapes them (Python would leave them raw)."""
    payload = {key: value for key, value in evidence.items() if key != "digest"}
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    text = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", text)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def all_keys(value: Any) -> set[str]:
    if isinstance(value, dict):
        return set(value).union(*(all_keys(item) for item in value.values()))
    if isinstance(value, list):
        return set().union(*(all_keys(item) for item in value))
    return set()


def test_golden_fixtures_exist() -> None:
    assert len(GOLDEN) >= 6


@pytest.mark.parametrize("name", GOLDEN)
def test_compile_reproduces_the_reference_evidence_field_for_field(name: str) -> None:
    expected = load_fixture(f"{name}.evidence.json")
    actual = compile(load_fixture(f"{name}.input.json"))
    assert actual == expected
    assert actual["digest"] == expected["digest"]


@pytest.mark.parametrize("name", GOLDEN)
def test_independent_serializer_agrees_on_golden_digests(name: str) -> None:
    evidence = load_fixture(f"{name}.evidence.json")
    keys = sorted(all_keys(evidence))
    # key order: code units and ICU agree for these keys, so sort_keys is a faithful oracle
    assert keys == sorted(keys, key=functools.cmp_to_key(js_locale_compare))
    assert oracle_digest(evidence) == evidence["digest"]
    assert verify_evidence_digest(evidence)


def test_known_digests() -> None:
    # Values computed by Node.js from the reference algorithm (see module docstring).
    assert compile(load_fixture("plan_with_artifact.input.json"))["digest"] == (
        "sha256:0c9b58efd33299b2a1041151bd347642ef65d122b9744b9ce8a5502d5ad863b7"
    )
    assert compile(load_fixture("legacy_narrowed.input.json"))["digest"] == (
        "sha256:4c9e29c92bb221b25086f26799705deb6d2cb5e4cb001d52f41cd3797a7cb2a2"
    )


def test_digest_excludes_itself_and_detects_edits() -> None:
    evidence = compile(compiler_input("implement"))
    assert evidence_digest(evidence) == evidence_digest(
        {**evidence, "digest": "sha256:" + "f" * 64}
    )
    edited = json.loads(json.dumps(evidence))
    edited["effectiveAuthority"]["network.egress"] = ["evil.example"]
    assert not verify_evidence_digest(edited)
    assert oracle_digest(evidence) == evidence["digest"]


def test_blocker_without_source_id_has_no_key_at_all() -> None:
    evidence = compile(
        compiler_input("implement", parent=source("parent", {"filesystem.read": []}))
    )
    assert evidence["blockers"] == [
        {
            "code": "required-authority-denied",
            "message": "The authority intersection denies every requested filesystem.read scope.",
            "dimension": "filesystem.read",
        }
    ]
    with_null = json.loads(json.dumps(evidence))
    with_null["blockers"][0]["sourceId"] = None
    assert evidence_digest(with_null) != evidence["digest"]


# --------------------------------------------------------------------------- JSON.stringify


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("plain", '"plain"'),
        ('q"b\\', '"q\\"b\\\\"'),
        ("\b\f\n\r\t", '"\\b\\f\\n\\r\\t"'),
        ("\u0000\u001f", '"\\u0000\\u001f"'),
        ("\u007f\u0085\u2028\u2029", '"\u007f\u0085\u2028\u2029"'),  # literal, unlike \u escapes
        ("café 日本 😀", '"café 日本 😀"'),
        ("\ud800", '"\\ud800"'),  # lone surrogates: lowercase escapes
        ("a\udfffb", '"a\\udfffb"'),
        ("\ud83d\ude00", '"😀"'),  # a pair held as two code points is one character
        ("</script>", '"</script>"'),
    ],
)
def test_strings_serialize_like_json_stringify(value: str, expected: str) -> None:
    assert js_json_string(value) == expected


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        (0, "0"),
        (-0.0, "0"),
        (1.0, "1"),
        (10000, "10000"),
        (0.1, "0.1"),
        (1e21, "1e+21"),
        (1e20, "100000000000000000000"),
        (1.5e-7, "1.5e-7"),
        (0.000001, "0.000001"),
        (123456789.125, "123456789.125"),
        (2**53 + 1, "9007199254740992"),  # what JSON.parse makes of it
        (5e-324, "5e-324"),
        (float("nan"), "null"),
        (float("inf"), "null"),
    ],
)
def test_numbers_serialize_like_json_stringify(value: float, expected: str) -> None:
    assert js_json_number(value) == expected


def test_keys_sort_with_locale_compare_and_index_keys_first() -> None:
    assert stable_stringify({"b": 1, "a": 2, "B": 3, "10": 4, "2": 5, "_": 6, "-": 7}) == (
        '{"2":5,"10":4,"_":6,"-":7,"a":2,"b":1,"B":3}'
    )
    assert stable_stringify([{"z": [], "y": None}, True, "x"]) == '[{"y":null,"z":[]},true,"x"]'


def test_locale_compare_orders_like_icu_root_collation() -> None:
    def by_locale(values: list[str]) -> list[str]:
        return sorted(values, key=functools.cmp_to_key(js_locale_compare))

    assert by_locale(["Ab", "aB", "ab", "a.b", "a-b"]) == ["a-b", "a.b", "ab", "aB", "Ab"]
    assert by_locale(["sandbox.x", "sandbox:x", "Sandbox-X", "sandbox-x", "sandbox_x"]) == [
        "sandbox_x",
        "sandbox-x",
        "Sandbox-X",
        "sandbox:x",
        "sandbox.x",
    ]
    assert sorted(["Ab", "aB", "ab", "a.b", "a-b"]) == ["Ab", "a-b", "a.b", "aB", "ab"]
    assert js_locale_compare("a", "a") == 0
    assert js_locale_compare("", "a") == -1


def test_javascript_trim_and_length() -> None:
    assert js_trim("\ufeff\u00a0 x \u2028\u3000") == "x"
    assert js_trim("\u0085x\u0085") == "\u0085x\u0085"
    assert js_trim("\u001cx") == "\u001cx"
    assert "\u001cx".strip() == "x" and "\ufeffx".strip() == "\ufeffx"  # why we do not use strip
    assert utf16_length("a😀") == 3


_ascii_keys = st.text(alphabet="abcdefghijklmnopqrstuvwxyz", min_size=1, max_size=6)
_json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(_ascii_keys, children, max_size=4),
    max_leaves=20,
)


@given(_json_values)
def test_stable_stringify_matches_sorted_json_for_lowercase_keys(value: Any) -> None:
    expected = json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    expected = re.sub("[\ud800-\udfff]", lambda m: f"\\u{ord(m.group()):04x}", expected)
    assert stable_stringify(value) == expected
