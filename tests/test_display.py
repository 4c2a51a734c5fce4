"""``display.safe``: exactly the controls, bidi marks and overrides and separators it
documents are escaped, each range to its last code point, and nothing else."""

from __future__ import annotations

import re
from typing import Any

from agentledger.display import plural, safe

ESCAPED = {
    *range(0x00, 0x20),  # C0 controls, ESC included
    *range(0x7F, 0xA0),  # DEL and the C1 controls
    0x061C,  # ARABIC LETTER MARK
    0x200E,  # LEFT-TO-RIGHT MARK
    0x200F,  # RIGHT-TO-LEFT MARK
    0x2028,  # LINE SEPARATOR
    0x2029,  # PARAGRAPH SEPARATOR
    *range(0x202A, 0x202F),  # LRE, RLE, PDF, LRO, RLO
    *range(0x2066, 0x206A),  # LRI, RLI, FSI, PDI
}


def test_every_documented_code_point_is_escaped_and_no_other() -> None:
    # Past the last escaped code point by a margin: every range's neighbours are tried.
    for code in range(0x2100):
        char = chr(code)
        expected = (
            (f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}") if code in ESCAPED else char
        )
        assert safe(char) == expected, f"U+{code:04X}"


def test_escaping_is_idempotent() -> None:
    text = "".join(chr(code) for code in sorted(ESCAPED))
    assert safe(safe(text)) == safe(text)


def test_one_of_a_thing_is_singular_in_every_report(cli: Any) -> None:
    """A one-entry ledger's report said "checkpoint #1: 1 entries"; four copies of the
    plural helper disagreed on the rest."""
    assert [plural(1, "entry", "entries"), plural(1_000, "entry", "entries")] == [
        "1 entry",
        "1,000 entries",
    ]
    assert plural(2, "run") == "2 runs"
    assert cli("append", "r", "step", '{"n": 1}').code == 0
    text = cli("verify", "--all").out
    assert "checkpoint #1: 1 entry, root" in text, text
    assert re.search(r"(?<![\d,.])1 (entries|runs)\b", text) is None, text
