"""Property-based fuzzing of every parser: whatever the bytes, only the parser's typed
error escapes, and what is accepted round-trips. The ``slow`` twins run 20x the examples."""

from __future__ import annotations

import contextlib
import json
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from agentledger import _core
from agentledger.activity import ActivityResult, Observation
from agentledger.activity.team import InvalidManifest, parse_manifest
from agentledger.errors import InvalidInput
from agentledger.notes import Checkpoint
from agentledger.phase import compile as compile_phase
from agentledger.proofs import parse_bundle

FIXTURES = Path(__file__).resolve().parents[1] / "phase" / "fixtures"
FAST = settings(max_examples=150, deadline=None, suppress_health_check=list(HealthCheck))
LONG = settings(max_examples=3000, deadline=None, suppress_health_check=list(HealthCheck))

HOSTILE_TOKENS = [
    b"NaN", b"Infinity", b"-Infinity", b'"\\ud800"', b'"\\udc00\\ud800"', b"1e400", b"-0",
    b"[" * 200, b"]" * 200, b"{" * 200, b'"a":', b",", b'"\x00"', b"\xff", b"\xed\xa0\x80",
    b"9" * 400, b"0.1e-400", b'"' + b"x" * 1000 + b'"', b"true", b"null", b"\\u0000",
]  # fmt: skip

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=20),
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=30,
)  # fmt: skip


@st.composite
def mutated_json(draw: st.DrawFn) -> bytes:
    """Valid JSON text, then cut, spliced with hostile tokens, or bytes flipped."""
    text = json.dumps(draw(json_values), ensure_ascii=draw(st.booleans())).encode()
    for _ in range(draw(st.integers(0, 3))):
        at = draw(st.integers(0, len(text)))
        action = draw(st.sampled_from(["cut", "insert", "flip", "duplicate"]))
        if action == "cut":
            text = text[:at]
        elif action == "insert":
            text = text[:at] + draw(st.sampled_from(HOSTILE_TOKENS)) + text[at:]
        elif action == "flip" and text:
            i = min(at, len(text) - 1)
            text = text[:i] + bytes([draw(st.integers(0, 255))]) + text[i + 1 :]
        else:
            text = text[:at] + text[at // 2 : at] + text[at:]
    return text


any_text = mutated_json() | st.binary(max_size=200)


def _check_canonicalize_json(data: bytes) -> None:
    try:
        canonical = _core.canonicalize_json(data)
    except _core.CanonicalizationError:
        return
    assert _core.canonicalize_json(canonical) == canonical
    # Numbers in JSON text are doubles: re-canonicalizing the parsed value gives the same.
    assert _core.canonicalize(json.loads(canonical, parse_int=float)) == canonical


def _check_pyjson_agrees_with_python(data: bytes) -> None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return
    try:
        value = json.loads(text)
        expected: bytes | None = json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
    except (ValueError, RecursionError):
        expected = None
    try:
        got: bytes | None = _core.pyjson_dumps(text.encode("utf-8", "surrogatepass"), "py-json-v1")
    except ValueError:
        got = None
    assert got == expected


def _mutate(value: Any, draw: st.DrawFn) -> Any:
    """Replace, drop or add one member somewhere in a JSON document."""
    if isinstance(value, dict) and value and draw(st.booleans()):
        key = draw(st.sampled_from(sorted(value)))
        changed = dict(value)
        action = draw(st.sampled_from(["replace", "drop", "add", "recurse"]))
        if action == "replace":
            changed[key] = draw(json_values | st.sampled_from([math.nan, "\ud800", -1, 2**70]))
        elif action == "drop":
            del changed[key]
        elif action == "add":
            changed[draw(st.text(max_size=10))] = draw(json_values)
        else:
            changed[key] = _mutate(value[key], draw)
        return changed
    if isinstance(value, list) and value and draw(st.booleans()):
        i = draw(st.integers(0, len(value) - 1))
        return [*value[:i], _mutate(value[i], draw), *value[i + 1 :]]
    return draw(json_values) if draw(st.booleans()) else value


def _phase_inputs() -> list[Any]:
    return [json.loads(p.read_text()) for p in sorted(FIXTURES.glob("*.input.json"))]


def _activity_document() -> dict[str, Any]:
    return ActivityResult.build(
        kind="research",
        artifact={"summary": "s"},
        observations=[Observation.capture("page", "https://example.org", b"page")],
    ).to_json()


@st.composite
def phase_inputs(draw: st.DrawFn) -> Any:
    return _mutate(draw(st.sampled_from(_phase_inputs())), draw)


@st.composite
def activity_documents(draw: st.DrawFn) -> Any:
    return _mutate(_activity_document(), draw)


def _check_phase_compile(compiler_input: Any) -> None:
    try:
        evidence = compile_phase(compiler_input)
    except InvalidInput:
        return
    assert evidence["schemaVersion"] and evidence["digest"].startswith("sha256:")


def _check_activity_document(doc: Any) -> None:
    try:
        result = ActivityResult.from_json(doc)
    except InvalidInput:
        return
    assert ActivityResult.from_json(result.to_json()) == result


TOML_PIECES = ["[[roles]]\n", 'role = "dev"\n', 'agent_kind = "data"\n', "a = [[[[1]]]]\n",
               'role = "\\ud800"\n', "[roles]\n", "agent_kind = 5\n", "x = {y = {z = 1}}\n",
               '"\\u0000" = 1\n', "= =\n", "\x00"]  # fmt: skip


@st.composite
def manifests(draw: st.DrawFn) -> bytes:
    pieces = draw(st.lists(st.sampled_from(TOML_PIECES) | st.text(max_size=20), max_size=8))
    return "".join(pieces).encode("utf-8", "surrogatepass")


def _check_manifest(data: bytes) -> None:
    try:
        roles = parse_manifest(data)
    except InvalidManifest:
        return
    assert roles


def _check_checkpoint_and_proof(data: bytes) -> None:
    for parse in (Checkpoint.parse, parse_bundle):
        with contextlib.suppress(InvalidInput):
            parse(data)


PROPERTIES: dict[str, tuple[Callable[[Any], None], Any]] = {
    "canonicalize_json": (_check_canonicalize_json, any_text),
    "pyjson_dumps agrees with Python json": (_check_pyjson_agrees_with_python, any_text),
    "phase compiler input": (_check_phase_compile, phase_inputs()),
    "activity result documents": (_check_activity_document, activity_documents()),
    "team manifests": (_check_manifest, manifests() | st.binary(max_size=100)),
    "checkpoint notes and proof bundles": (_check_checkpoint_and_proof, any_text),
}


@pytest.mark.parametrize("name", list(PROPERTIES))
def test_parsers_raise_only_their_typed_error_on_any_input(name: str) -> None:
    check, strategy = PROPERTIES[name]
    FAST(given(strategy)(check))()


@pytest.mark.slow
@pytest.mark.parametrize("name", list(PROPERTIES))
def test_parsers_raise_only_their_typed_error_on_any_input_long(name: str) -> None:
    check, strategy = PROPERTIES[name]
    LONG(given(strategy)(check))()


def test_deeply_nested_inputs_are_typed_refusals_in_every_parser() -> None:
    deep_json = b"[" * 100_000 + b"]" * 100_000
    with pytest.raises(_core.CanonicalizationError):
        _core.canonicalize_json(deep_json)
    with pytest.raises(ValueError):
        _core.pyjson_dumps(deep_json, "py-json-v1")
    with pytest.raises(InvalidManifest):
        parse_manifest(b"a = " + b"[" * 100_000 + b"]" * 100_000)
    with pytest.raises(InvalidManifest):
        parse_manifest(b"a = " + b"{b=" * 5_000 + b"1" + b"}" * 5_000)
    with pytest.raises(InvalidInput):
        parse_bundle(deep_json)
