"""Regenerate the test data of rust/bernstein/tests/reports.rs from the Python reference.

    .venv/bin/python rust/bernstein/tests/data/make_report_cases.py [FIXTURE]

The reference is this checkout's ``reports.py`` (``python/agentledger/bernstein/reports.py``,
or ``tests/bernstein/reference_reports.py`` where it lives there), loaded by path; the
``agentledger`` it imports (``format``, ``_core``) is the installed one.

FIXTURE is bernstein 3.23.0's shapes fixture (default: ../shared/fixtures/
bernstein-3.23.0-shapes next to the project root). Next to this script it writes:

* ``cas/<hex>``: every research and browser report the fixture stores, and every page,
  screenshot and DOM they cite (the store the tests read, at ``.sdd/cas/<hex>``);
* ``fixture-verdicts.json``: bernstein's own verdict for each of those reports, taken
  from the fixture's ``verdicts.json`` (``claim_verdicts`` / ``browser_verdict``);
* ``report-cases.json``: damaged and quirky reports, one a line, each with the store
  changes it needs (``put``: path -> hex bytes, ``drop``: paths) and what
  ``agentledger.bernstein.reports`` (``verify_research_report`` / ``verify_browser_report``)
  gives for it: the verdict, or ``{"crash": "<exception as Python prints it>"}`` when the
  reference raises. A report is given whole (``report``), or as ``edits`` of a stored one
  (``base``, the file under ``cas/``): ``[path, value]`` sets the member or item at
  ``path`` (a new member goes last), ``[path]`` deletes it.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import json
import shutil
import sys
import unicodedata
from pathlib import Path
from typing import Any

from agentledger.bernstein.format import acanon, cas_path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[3]
FIXTURE = ROOT.parent / "shared" / "fixtures" / "bernstein-3.23.0-shapes"


def _reference() -> Any:
    for path in ("python/agentledger/bernstein/reports.py", "tests/bernstein/reference_reports.py"):
        if (ROOT / path).exists():
            spec = importlib.util.spec_from_file_location("reference_reports", ROOT / path)
            assert spec is not None and spec.loader is not None
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module  # dataclasses look their module up
            spec.loader.exec_module(module)
            return module
    raise SystemExit("reports.py not found in this checkout")


reference = _reference()
norm = reference.norm
verify_browser_report = reference.verify_browser_report
verify_research_report = reference.verify_research_report

# The reports the damaged cases start from (fixture run r0001 / r0002, stage *-0).
RESEARCH = "6605b8ab3e682c64b3365c8200c4ea3989eaa27b4c216331d7659b4f81cec422"
BROWSER = "93ee2e491473bf32fc6e5c5681a9d7c21e5156ac1b854480380bb360e490be91"


# int() reads every Unicode decimal digit and whitespace character (the Python here decides).
DIGITS = [
    chr(c) for c in range(128, sys.maxunicode + 1) if unicodedata.decimal(chr(c), None) is not None
]
SPACES = "".join(chr(c) for c in range(128, sys.maxunicode + 1) if chr(c).isspace())


def path_of(digest: str) -> str:
    """Where the store keeps `digest` (a name inside the workdir)."""
    path = cas_path(digest)
    assert path is not None
    return path


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def copy_fixture(fixture: Path) -> None:
    """The stored reports, the blobs they cite, and bernstein's verdicts on them."""
    cas_dir = fixture / ".sdd" / "cas"
    verdicts = json.loads((fixture / "verdicts.json").read_text())
    out = HERE / "cas"
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir()
    expected = []
    for run_dir in sorted((fixture / ".sdd" / "runs").iterdir()):
        stages = {s["stage_id"]: s for s in verdicts["runs"][run_dir.name]["cli_json"]["stages"]}
        for line in (run_dir / "journal.jsonl").read_text().splitlines():
            row = json.loads(line) if line.strip() else {}
            if row.get("event") != "activity.result" or row["kind"] not in ("research", "browser"):
                continue
            name = row["artifact_hash"].split(":", 1)[1]
            if not (cas_dir / name).exists():
                continue
            report = json.loads((cas_dir / name).read_bytes())
            names = [name]
            if row["kind"] == "research":
                names += [
                    c["page_content_hash"] for cl in report["claims"] for c in cl["citations"]
                ]
            else:
                for step in report["steps"]:
                    names += [step["screenshot_content_hash"], step["dom_content_hash"]]
            for blob in names:
                blob = blob.split(":", 1)[-1]
                shutil.copyfile(cas_dir / blob, out / blob)
            stage = stages[row["stage_id"]]
            key = "claim_verdicts" if row["kind"] == "research" else "browser_verdict"
            expected.append(
                {
                    "run": run_dir.name,
                    "stage_id": row["stage_id"],
                    "kind": row["kind"],
                    "artifact_hash": row["artifact_hash"],
                    key: stage[key],
                }
            )
    text = json.dumps(expected, indent=1, sort_keys=True) + "\n"
    (HERE / "fixture-verdicts.json").write_text(text)


class Case:
    """A report and the store it is checked against: the copied blobs, changed."""

    def __init__(self, kind: str, report: Any, base: str | None = None) -> None:
        self.kind = kind
        self.report = report
        self.base = base
        self.put: dict[str, bytes] = {}
        self.drop: list[str] = []

    def blob(self, data: bytes) -> str:
        """Store `data` under its content hash, and return the hash."""
        self.put[f".sdd/cas/{sha(data)}"] = data
        return "sha256:" + sha(data)


def base(name: str) -> Any:
    report = json.loads((HERE / "cas" / name).read_bytes())
    report.pop("meta", None)  # extras bernstein ignores: kept small here
    return report


def flow_step(
    case: Case, index: Any, kind: str, target: str, value: str, shot: bytes, dom: bytes, prev: str
) -> dict[str, Any]:
    """A step that replays: its blobs stored, its digests and anchor computed."""
    dom_digest = sha(norm(dom))
    observation = sha(shot + dom_digest.encode("ascii"))
    doc = {
        "action": {"kind": kind, "target": target, "value_digest": value},
        "observation_hash": observation,
        "prev_anchor": prev,
    }
    return {
        "index": index,
        "action_kind": kind,
        "action_target": target,
        "action_value_digest": value,
        "screenshot_content_hash": case.blob(shot),
        "dom_content_hash": case.blob(dom),
        "dom_digest": dom_digest,
        "observation_hash": observation,
        "prev_anchor": prev,
        "anchor": sha(acanon(doc)),
    }


def flow(case: Case, indexes: list[Any], doms: list[bytes] | None = None) -> None:
    """Steps that replay, with these recorded indexes (and DOMs), and their head."""
    steps, prev = [], ""
    for n, index in enumerate(indexes):
        dom = doms[n] if doms else f"<p>step {n}</p>".encode()
        step = flow_step(case, index, "click", f"#b{n}", "", b"png%d" % n, dom, prev)
        steps.append(step)
        prev = step["anchor"]
    case.report = {"head_anchor": prev, "steps": steps, "checks": []}


def research_cases() -> dict[str, Case]:
    cases: dict[str, Case] = {}

    def case(name: str) -> tuple[Case, Any]:
        cases[name] = Case("research", base(RESEARCH), RESEARCH)
        return cases[name], cases[name].report

    r = base(RESEARCH)
    page = [cl["citations"][0]["page_content_hash"] for cl in r["claims"]]
    good = copy.deepcopy(r["claims"][0]["citations"][0])

    c, rep = case("research_unchanged")
    c, rep = case("research_page_missing")
    c.drop.append(path_of(page[1]))
    c, rep = case("research_page_bytes_wrong")
    c.put[path_of(page[0])] = b"not the page"
    c, rep = case("research_quote_not_found")
    rep["claims"][2]["citations"][0]["quote"] = "not on the page"
    c, rep = case("research_claims_empty")
    rep["claims"] = []
    c, rep = case("research_claims_missing")
    del rep["claims"]
    c, rep = case("research_claims_not_a_list")
    rep["claims"] = {"claim_id": "c0", "citations": [good]}
    c, rep = case("research_non_dict_claims_skipped")
    rep["claims"] = [1, "claim", None, [rep["claims"][0]], rep["claims"][1]]
    c, rep = case("research_only_non_dict_claims")
    rep["claims"] = [1, "claim", None]
    c, rep = case("research_report_not_a_dict")
    c.report = [rep]
    c, rep = case("research_claim_without_citations")
    rep["claims"][1]["citations"] = []
    c, rep = case("research_claim_citations_missing")
    del rep["claims"][0]["citations"]
    c, rep = case("research_citations_not_a_list")
    rep["claims"][0]["citations"] = good
    c, rep = case("research_non_dict_citations_skipped")
    rep["claims"][0]["citations"] = [1, good, "x", None, good]
    c, rep = case("research_second_citation_fails")
    bad = dict(good, quote="absent")
    rep["claims"][0]["citations"] = [good, good, bad, good]
    c, rep = case("research_first_failing_claim_gives_the_reason")
    rep["claims"][1]["citations"][0]["quote"] = "absent"
    rep["claims"][2]["citations"] = []
    c, rep = case("research_claim_ids_through_str")
    ids = [
        5,
        None,
        1.5,
        True,
        {"a": [1, "b", None]},
        [1e-07, -0.0],
        "it's",
        'say "hi"\n',
        "\x7f\u00e9\u2028\U0001f600",
    ]
    rep["claims"] = [{"claim_id": i, "citations": []} for i in ids] + [{"citations": []}]
    c, rep = case("research_claim_id_lone_surrogate")
    rep["claims"] = [{"claim_id": "\ud800x", "citations": []}]
    c, rep = case("research_quote_empty")
    rep["claims"][0]["citations"][0]["quote"] = ""
    c, rep = case("research_quote_missing")
    del rep["claims"][0]["citations"][0]["quote"]
    c, rep = case("research_quote_through_str")
    page_hash = c.blob(b"a page: 12345, 1.5, None, True, [1, 'x'] \xed\xb2\x80 end")
    rep["claims"] = [
        {"claim_id": f"q{n}", "citations": [{"page_content_hash": page_hash, "quote": q}]}
        for n, q in enumerate([12345, 1.5, None, True, [1, "x"]])
    ]
    # bernstein encodes the quote as strict UTF-8: a lone surrogate raises, even where the
    # page holds its surrogatepass bytes
    c, rep = case("research_quote_lone_surrogate")
    page_hash = c.blob(b"a page \xed\xb2\x80 end")
    rep["claims"] = [
        {"claim_id": "q0", "citations": [{"page_content_hash": page_hash, "quote": "page"}]},
        {"claim_id": "q1", "citations": [{"page_content_hash": page_hash, "quote": "\udc80 end"}]},
    ]
    c, rep = case("research_quote_lone_surrogate_unread")
    rep["claims"][0]["citations"][0]["quote"] = "\ud800"
    rep["claims"][0]["citations"][0]["page_content_hash"] = "sha256:" + "0" * 64
    c, rep = case("research_page_hash_missing")
    del rep["claims"][0]["citations"][0]["page_content_hash"]
    # ContentStore.get raises (and bernstein with it) on a name the file system cannot take
    c, rep = case("research_page_hash_nul")
    rep["claims"][1]["citations"][0]["page_content_hash"] = "sha256:ab\x00cd"
    c, rep = case("research_page_hash_lone_surrogate")
    rep["claims"][0]["citations"][0]["page_content_hash"] = "sha256:\ud800"
    c, rep = case("research_page_hash_escapable_surrogate")
    rep["claims"][0]["citations"][0]["page_content_hash"] = "sha256:\udc80"
    c, rep = case("research_page_hash_not_a_string")
    rep["claims"][0]["citations"][0]["page_content_hash"] = 7
    c, rep = case("research_page_hash_upper_case")
    rep["claims"][0]["citations"][0]["page_content_hash"] = page[0].upper()
    c, rep = case("research_page_hash_without_prefix")
    rep["claims"][0]["citations"][0]["page_content_hash"] = page[0].split(":")[1]
    c, rep = case("research_page_hash_escaping_the_store")
    rep["claims"][0]["citations"][0]["page_content_hash"] = "sha256:../cas/" + page[0][7:]
    c, rep = case("research_page_hash_other_prefix")
    rep["claims"][0]["citations"][0]["page_content_hash"] = "md5:" + page[0][7:]
    return cases


def browser_cases() -> dict[str, Case]:
    cases: dict[str, Case] = {}

    def case(name: str) -> tuple[Case, Any]:
        cases[name] = Case("browser", base(BROWSER), BROWSER)
        return cases[name], cases[name].report

    b = base(BROWSER)
    steps = b["steps"]

    c, rep = case("browser_unchanged")
    c, rep = case("browser_screenshot_missing")
    c.drop.append(path_of(steps[1]["screenshot_content_hash"]))
    c, rep = case("browser_dom_missing")
    c.drop.append(path_of(steps[0]["dom_content_hash"]))
    c, rep = case("browser_dom_bytes_wrong")
    c.put[path_of(steps[2]["dom_content_hash"])] = b"<html>other</html>"
    c, rep = case("browser_screenshot_bytes_wrong")
    c.put[path_of(steps[0]["screenshot_content_hash"])] = b"other"
    c, rep = case("browser_screenshot_hash_empty")
    rep["steps"][0]["screenshot_content_hash"] = ""
    c, rep = case("browser_broken_chain_link")
    rep["steps"][1]["prev_anchor"] = "0" * 64
    c, rep = case("browser_first_prev_anchor_not_genesis")
    rep["steps"][0]["prev_anchor"] = rep["head_anchor"]
    c, rep = case("browser_dom_digest_mismatch")
    rep["steps"][2]["dom_digest"] = "f" * 64
    c, rep = case("browser_observation_hash_mismatch")
    rep["steps"][1]["observation_hash"] = rep["steps"][1]["observation_hash"].upper()
    c, rep = case("browser_unknown_action_kind")
    rep["steps"][0]["action_kind"] = "hover"
    c, rep = case("browser_action_kind_not_a_string")
    rep["steps"][1]["action_kind"] = ["click"]
    c, rep = case("browser_anchor_mismatch")
    rep["steps"][2]["anchor"] = "a" * 64
    c, rep = case("browser_action_target_changed")
    rep["steps"][1]["action_target"] = "#el-1 > x"
    c, rep = case("browser_head_anchor_mismatch")
    rep["head_anchor"] = rep["steps"][1]["anchor"]
    c, rep = case("browser_head_anchor_missing")
    del rep["head_anchor"]
    c, rep = case("browser_check_recompute_mismatch")
    rep["checks"][0]["passed"] = False
    rep["checks"][2]["passed"] = True
    c, rep = case("browser_screenshot_check_mismatch")
    rep["checks"][3]["operand"] = steps[1]["screenshot_content_hash"]
    c, rep = case("browser_check_step_not_resolved")
    rep["checks"][1]["step_index"] = 7
    c, rep = case("browser_check_step_index_negative_unresolved")
    rep["checks"][1]["step_index"] = -1
    c, rep = case("browser_check_step_index_negative_counts_from_the_end")
    rep["steps"][0]["index"] = -3
    del rep["steps"][2]["index"]
    rep["checks"] = [
        dict(rep["checks"][0], step_index=-3),
        dict(rep["checks"][1], step_index=-1),
        dict(rep["checks"][3], step_index=-3),
        dict(rep["checks"][3], check_id="chk-4", step_index=-1),
    ]
    c, rep = case("browser_check_step_index_out_of_range")
    rep["steps"][2]["index"] = 5
    rep["checks"][2]["step_index"] = 5
    c, rep = case("browser_check_step_index_out_of_range_negative")
    rep["steps"][2]["index"] = -4
    rep["checks"][2]["step_index"] = -4
    c, rep = case("browser_check_step_index_beyond_an_index")
    rep["steps"][2]["index"] = 10**20
    rep["checks"][2]["step_index"] = 10**20
    c, rep = case("browser_check_step_index_most_negative_index")
    rep["steps"][2]["index"] = -(2**63)
    rep["checks"][2]["step_index"] = "-9223372036854775808"
    c, rep = case("browser_check_step_index_below_an_index")
    rep["steps"][2]["index"] = -(2**63) - 1
    rep["checks"][2]["step_index"] = -(2**63) - 1
    c, rep = case("browser_duplicate_recorded_indexes")
    rep["steps"][1]["index"] = 0
    rep["checks"][0]["operand"] = "step 1"
    c, rep = case("browser_checks_after_a_failing_step")
    rep["steps"][1]["dom_digest"] = "0" * 64
    c, rep = case("browser_step_failure_reason_wins_over_checks")
    rep["steps"][2]["anchor"] = "b" * 64
    rep["checks"][0]["passed"] = False
    c, rep = case("browser_first_failing_check_gives_the_reason")
    rep["checks"][1]["passed"] = False
    rep["checks"][3]["operand"] = ""
    c, rep = case("browser_head_mismatch_reason_wins_over_checks")
    rep["head_anchor"] = ""
    rep["checks"][0]["passed"] = 0
    c, rep = case("browser_non_dict_steps_and_checks_skipped")
    rep["steps"] = [None, rep["steps"][0], 1, rep["steps"][1], "step", rep["steps"][2], []]
    rep["checks"] = [0, rep["checks"][0], "x", rep["checks"][3]]
    c, rep = case("browser_steps_not_a_list")
    rep["steps"] = {"0": steps[0]}
    c, rep = case("browser_steps_and_checks_missing_head_empty")
    c.report = {"head_anchor": ""}
    c, rep = case("browser_report_not_a_dict")
    c.report = [rep]
    c, rep = case("browser_report_a_string")
    c.report = "report"

    # passed through bool()
    c, rep = case("browser_passed_truthiness")
    truthy = ["false", "", 0, 1, 0.0, -0.0, float("nan"), 2.5, None, [], [0], {}, {"a": 0}, "0"]
    rep["checks"] = [
        dict(rep["checks"][k], check_id=f"p{n}-{k}", passed=v)
        for n, v in enumerate(truthy)
        for k in (0, 2)
    ] + [{k: v for k, v in rep["checks"][0].items() if k != "passed"}]

    # check kinds and operands
    c, rep = case("browser_check_kind_unknown")
    rep["checks"][1]["kind"] = "dom_has"
    c, rep = case("browser_check_kind_missing")
    del rep["checks"][3]["kind"]
    c, rep = case("browser_check_kind_missing_is_dom_contains")
    del rep["checks"][0]["kind"]
    c, rep = case("browser_check_kind_not_a_string")
    rep["checks"][0]["kind"] = ["dom_contains"]
    c, rep = case("browser_check_fields_missing")
    rep["checks"] = [{"kind": "dom_contains"}, {"kind": "screenshot_hash_equals"}]
    rep["steps"][2]["index"] = -1
    c, rep = case("browser_check_operand_lone_surrogate")
    rep["checks"][0]["operand"] = "caf\udce9"
    rep["checks"][0]["passed"] = False
    c, rep = case("browser_screenshot_check_operand_lone_surrogate")
    rep["checks"][3]["operand"] = "\ud800"
    rep["checks"][3]["passed"] = False
    c, rep = case("browser_screenshot_hash_nul")
    rep["steps"][1]["screenshot_content_hash"] = "sha256:\x00"
    c, rep = case("browser_dom_hash_lone_surrogate")
    rep["steps"][0]["dom_content_hash"] = "sha256:ab\udfff"
    c, rep = case("browser_check_ids_through_repr")
    for n, check_id in enumerate([3, None, "it's", "a\tb\u0085"]):
        rep["checks"][n]["check_id"] = check_id
        rep["checks"][n]["passed"] = not rep["checks"][n]["passed"]

    # whitespace normalization
    c, rep = case("browser_dom_normalization")
    doms = [b"  caf\xc3\xa9\t\n au\x0blait \x0c\r  end ", b"\xc2\xa0nbsp\x1cfs  ", b""]
    flow(c, [0, 1, 2], doms)
    kinds = ["dom_contains", "dom_not_contains"]
    operands = [
        " caf\u00e9  au lait ",
        "café au lait end",
        "caf\u00e9 au",
        "\u00a0nbsp",
        "nbsp\x1cfs",
        "nbsp",
        "",
        " \t",
        "\xa0",
    ]
    c.report["checks"] = [
        {"check_id": f"n{n}-{s}-{k}", "kind": kind, "operand": op, "step_index": s, "passed": True}
        for n, op in enumerate(operands)
        for s in (0, 1, 2)
        for k, kind in enumerate(kinds)
    ]

    # the anchor document as acanon writes it
    c, rep = case("browser_anchor_escapes")
    c.report["steps"], c.report["checks"] = [], []
    prev = ""
    targets = [
        'q"uote\\back',
        "nl\n tab\t cr\r bs\b ff\f nul\x00 us\x1f del\x7f",
        "\u2028\u00e9\U0001f600\ufeff",
    ]
    digests = ["/solidus", "\u0085", "</script>"]
    for n, (target, value) in enumerate(zip(targets, digests, strict=True)):
        step = flow_step(c, n, "type", target, value, b"s", b"<p>d</p>", prev)
        c.report["steps"].append(step)
        prev = step["anchor"]
    c.report["head_anchor"] = prev
    c, rep = case("browser_anchor_kinds")
    c.report["steps"] = []
    prev = ""
    kinds = ["navigate", "click", "type", "scroll", "key", "select", "submit", "wait", "screenshot"]
    for n, kind in enumerate(kinds):
        step = flow_step(c, n, kind, "", "", b"", b"", prev)
        c.report["steps"].append(step)
        prev = step["anchor"]
    c.report["head_anchor"] = prev
    c.report["checks"] = []
    c, rep = case("browser_anchor_lone_surrogate_in_target")
    rep["steps"][0]["action_target"] = "#el-0 \u2265 \udc80"
    c, rep = case("browser_anchor_lone_surrogates_in_value_digest")
    rep["steps"][0]["action_value_digest"] = "ab\udc80\ud800\ud801 \udc80"
    c, rep = case("browser_anchor_lone_surrogate_after_an_astral_character")
    rep["steps"][0]["action_target"] = "\U0001f600\n\ud83d"
    c, rep = case("browser_anchor_lone_surrogate_after_a_failing_step")
    rep["steps"][1]["prev_anchor"] = ""
    rep["steps"][2]["action_target"] = "\udc80"

    # int() of index and step_index
    c, rep = case("browser_recorded_indexes_through_int")
    forms = [
        " 1_0 ",
        "+0",
        "-0",
        "007",
        "\u0661\u0662",
        "\uff13",
        "\u2007 4 \u3000",
        "\x0b5\x0c",
        "\u0663_\u0664",
        "\U0001d7d7",
        "-1_000",
        True,
        False,
        2.9,
        -2.9,
        -0.5,
        1e20,
        -1.5e19,
        1e300,
        5e-324,
        9007199254740993,
        10**30,
        "0" * 30 + "9",
    ]
    flow(c, forms)
    c.report["checks"] = [
        {
            "check_id": f"i{n}",
            "kind": "dom_contains",
            "operand": "step",
            "step_index": s,
            "passed": True,
        }
        for n, s in enumerate(
            [10, "10", 10.7, "  0", -0.0, False, True, "1", 12, 3, 4.0, 5, 9, -2, 2, 7, 23, 6, -1]
        )
    ]
    for name, form in [
        ("underscore_first", "_1"),
        ("underscore_last", "1_"),
        ("double_underscore", "1__0"),
        ("sign_then_space", "- 1"),
        ("hex", "0x10"),
        ("empty", ""),
        ("space", " "),
        ("decimal_point", "1.0"),
        ("exponent", "1e3"),
        ("file_separator", "\x1c1"),
        ("nul", "1\x00"),
        ("letter", "one"),
        ("superscript", "\u00b2"),
        ("roman", "\u2167"),
        ("lone_surrogate", "\udc801"),
        ("del", "1\x7f"),
        ("sign_only", "-"),
        ("two_signs", "+-1"),
        ("nan_text", "nan"),
        ("null", None),
        ("list", [1]),
        ("dict", {"a": 1}),
        ("empty_list", []),
        ("nan", float("nan")),
        ("inf", float("inf")),
        ("minus_inf", float("-inf")),
        ("missing", ...),
    ]:
        c = cases[f"browser_index_{name}"] = Case("browser", {"steps": [{}], "checks": []})
        if form is not ...:
            c.report["steps"][0]["index"] = form
        c = cases[f"browser_step_index_{name}"] = Case(
            "browser", {"checks": [{"kind": "dom_contains"}]}
        )
        if form is not ...:
            c.report["checks"][0]["step_index"] = form
    for name, form in [
        ("too_many_digits", "1" * 4301),
        ("too_many_with_zeros", "0" * 4300 + "1"),
        ("most_digits", "1_" * 4299 + "1"),
        ("most_digits_with_zeros", "0" * 4299 + "1"),
        ("every_unicode_digit", "".join(DIGITS)),
        ("every_unicode_space", SPACES + "7" + SPACES),
        ("unicode_digit_then_other", "\u0669\u066a"),
        ("unicode_space_inside", "1\u00852"),
        ("superscript_one", "\u00b9"),
    ]:
        cases[f"browser_index_{name}"] = Case("browser", {"steps": [{"index": form}]})

    # which exception comes first
    c, rep = case("browser_steps_parse_before_checks")
    rep["checks"][0]["kind"] = "bad"
    rep["steps"][2]["index"] = None
    c, rep = case("browser_bad_kind_before_infinite_step_index")
    rep["checks"][0]["kind"] = "bad"
    rep["checks"][1]["step_index"] = float("inf")
    c, rep = case("browser_infinite_step_index_before_bad_kind")
    rep["checks"][0]["step_index"] = float("-inf")
    rep["checks"][1]["kind"] = "bad"
    c, rep = case("browser_infinite_index_before_bad_step_index")
    rep["steps"][0]["index"] = float("inf")
    rep["checks"][0]["step_index"] = "x"
    c, rep = case("browser_kind_checked_before_step_index")
    rep["checks"][0]["kind"] = "bad"
    rep["checks"][0]["step_index"] = float("inf")
    return cases


def diff(old: Any, new: Any, path: list[Any]) -> list[list[Any]]:
    """The edits that make `old` into `new`."""
    if isinstance(old, dict) and isinstance(new, dict):
        edits = [[[*path, key]] for key in old if key not in new]
        for key, value in new.items():
            edits += diff(old[key], value, [*path, key]) if key in old else [[[*path, key], value]]
        return edits
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        return [
            e for n, (a, b) in enumerate(zip(old, new, strict=True)) for e in diff(a, b, [*path, n])
        ]
    return [] if json.dumps(old) == json.dumps(new) else [[path, new]]


def apply(doc: Any, edits: list[list[Any]]) -> Any:
    doc = copy.deepcopy(doc)
    for edit in edits:
        *parents, last = edit[0]
        target = doc
        for key in parents:
            target = target[key]
        if len(edit) == 1:
            del target[last]
        else:
            target[last] = edit[1]
    return doc


def encode(case: Case) -> dict[str, Any]:
    """The report as it goes in the file: edits of its base when they are smaller."""
    if case.base is not None:
        stored = json.loads((HERE / "cas" / case.base).read_bytes())
        edits = diff(stored, case.report, [])
        rebuilt = apply(stored, edits) if all(edit[0] for edit in edits) else None
        same = json.dumps(rebuilt, sort_keys=True) == json.dumps(case.report, sort_keys=True)
        if same and len(json.dumps(edits)) < len(json.dumps(case.report)):
            return {"base": case.base, "edits": edits, "report": rebuilt}
    return {"report": case.report}


def run(case: Case, report: Any) -> dict[str, Any]:
    store = {
        str(p.relative_to(HERE)).replace("cas/", ".sdd/cas/", 1): p.read_bytes()
        for p in (HERE / "cas").iterdir()
    }
    store.update(case.put)
    for path in case.drop:
        store.pop(path, None)

    read = reference.store_reader(store.get)  # looks a hash up as ContentStore does
    report = json.loads(json.dumps(report))
    try:
        if case.kind == "research":
            ok, reason, claims = verify_research_report(report, read)
            return {"ok": ok, "reason": reason, "claims": claims}
        verdict: dict[str, Any] = verify_browser_report(report, read).to_json()
        return verdict
    except Exception as exc:  # what bernstein's own check raises: the expected crash
        return {"crash": f"{type(exc).__name__}: {exc}"}


def main() -> None:
    fixture = Path(sys.argv[1]) if len(sys.argv) > 1 else FIXTURE
    copy_fixture(fixture)
    lines = []
    for name, case in {**research_cases(), **browser_cases()}.items():
        given = encode(case)
        expect = run(case, given["report"])  # the report exactly as the file rebuilds it
        if "edits" in given:
            del given["report"]
        line = {
            "name": name,
            "kind": case.kind,
            **given,
            "put": {path: data.hex() for path, data in sorted(case.put.items())},
            "drop": case.drop,
            "expect": expect,
        }
        lines.append(json.dumps(line))
    (HERE / "report-cases.json").write_text("[\n" + ",\n".join(lines) + "\n]\n")
    print(f"{len(lines)} cases", file=sys.stderr)


if __name__ == "__main__":
    main()
