"""The verification report as a reviewer's document: one standalone HTML file.

No network: the style, a small inline SVG chart and a few lines of script are in the file.
It holds what was verified (ledger, version, time, trusted keys, the checkpoint matched),
the summary with every finding counted by check, the workspace findings, **every** failing
run as a collapsible section (anchors per run and per step, a filter box), and what each
check means. Long hashes wrap (``overflow-wrap: anywhere``) so it reads at 1000 px without
horizontal scrolling.

Every string from the ledger goes through ``display.safe`` (controls and bidi overrides made
visible) and then ``html.escape``.
"""

from __future__ import annotations

import html
import re
from collections import defaultdict

from agentledger.checks import RULE, explain
from agentledger.display import plural, safe
from agentledger.verify import Divergence, RunVerdict, VerifyReport

STYLE = """
:root { --fg: #1d1d1f; --muted: #6b6b70; --line: #d8d8de; --red: #b00020;
  --green: #1a7f37; --yellow: #9a6700; --bg-soft: #f5f5f7; }
* { box-sizing: border-box; }
body { margin: 0; color: var(--fg); background: #fff;
  font: 15px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, sans-serif; }
main { max-width: 70rem; margin: 0 auto; padding: 1.25rem; }
h1 { font-size: 1.5rem; margin: 0 0 .5rem; }
h2 { font-size: 1.15rem; margin: 1.75rem 0 .5rem; border-bottom: 1px solid var(--line); }
code, .hash, td, dd, summary { overflow-wrap: anywhere; word-break: break-word; }
code, .hash { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: .88em; }
table { border-collapse: collapse; width: 100%; table-layout: fixed; }
th, td { text-align: left; vertical-align: top; padding: .3rem .5rem;
  border-bottom: 1px solid var(--line); }
th { color: var(--muted); font-weight: 600; }
dl.meta { display: grid; grid-template-columns: 9rem minmax(0, 1fr); gap: .2rem 1rem; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; }
.verdict { display: inline-block; padding: .1rem .6rem; border-radius: 1rem; color: #fff;
  font-weight: 600; }
.verdict.clean { background: var(--green); } .verdict.diverged { background: var(--red); }
.verdict.missing, .verdict.no-verdict { background: var(--yellow); }
.status-diverged { color: var(--red); font-weight: 600; }
.status-missing, .status-no-verdict { color: var(--yellow); font-weight: 600; }
.expected { color: var(--fg); }
.actual, .holds { color: var(--red); }
.muted { color: var(--muted); }
details.run { border: 1px solid var(--line); border-radius: .4rem; margin: .5rem 0;
  padding: .3rem .75rem; }
details.run > summary { cursor: pointer; font-weight: 600; }
.step { margin: .5rem 0 .75rem; padding-left: .75rem; border-left: 3px solid var(--line); }
.step h3 { font-size: 1rem; margin: .25rem 0; }
.finding { margin: .3rem 0 .6rem; }
.finding dl { display: grid; grid-template-columns: 5.5rem minmax(0, 1fr); gap: .1rem .75rem;
  margin: .2rem 0 0; }
.finding dt { color: var(--muted); } .finding dd { margin: 0; }
.means { color: var(--muted); font-size: .92em; }
#filter { width: 100%; padding: .45rem .6rem; font-size: 1rem; border: 1px solid var(--line);
  border-radius: .4rem; }
svg { max-width: 100%; height: auto; display: block; }
a { color: #0b57d0; }
"""

SCRIPT = """
(function () {
  var box = document.getElementById("filter");
  var runs = Array.prototype.slice.call(document.querySelectorAll("details.run"));
  var shown = document.getElementById("shown");
  function apply() {
    var query = box.value.trim().toLowerCase();
    var count = 0;
    runs.forEach(function (run) {
      var hit = !query || run.getAttribute("data-search").indexOf(query) !== -1;
      run.hidden = !hit;
      if (hit) { count += 1; }
    });
    shown.textContent = count + " of " + runs.length;
  }
  box.addEventListener("input", apply);
  function openTarget() {
    var target = document.getElementById(decodeURIComponent(location.hash.slice(1)));
    while (target) { if (target.tagName === "DETAILS") { target.open = true; }
      target = target.parentElement; }
  }
  window.addEventListener("hashchange", openTarget);
  openTarget();
  apply();
})();
"""


def _e(value: object) -> str:
    """A ledger string, made visible and then HTML-escaped."""
    return html.escape(safe(value), quote=True)


_ANCHOR_UNSAFE = re.compile(r"[^A-Za-z0-9.-]")


def anchor(*parts: object) -> str:
    """The parts of an id attribute (a run id, a step, a check), each with every other
    character spelled ``_<hex>_`` (``_`` too, so spelling is one-to-one), joined by ``:``,
    which no spelled part holds: run ``x``'s step 1 and run ``x-step-1`` never share one."""
    return ":".join(
        _ANCHOR_UNSAFE.sub(lambda m: f"_{ord(m.group()):x}_", str(part)) for part in parts
    )


def _meta(report: VerifyReport) -> str:
    keys = (
        "".join(
            f"<div><code>{_e(k.key)}</code> <span class=muted>{_e(k.source)}</span></div>"
            for k in report.trusted_keys
        )
        or "<span class=muted>no keys</span>"
    )
    found = report.checkpoint
    if found is None:
        checkpoint = f"none: {_e(report.checkpoint_reason or 'not checked')}"
    else:
        signer = (
            f"signed by <code>{_e(found.trusted_signer)}</code>"
            if found.trusted_signer
            else "<span class=actual>signed by no trusted key</span>"
        )
        names = ", ".join(_e(name) for name in found.signers) or "none"
        checkpoint = (
            f"#{found.id}: {plural(found.size, 'entry', 'entries')}, "
            f"root <code>{_e(found.root)}</code>, "
            f"{signer} <span class=muted>(signature names: {names}"
            + (f"; {_e(found.time)})</span>" if found.time else ")</span>")
        )
    rows = [
        ("ledger", f"<code>{_e(report.ledger_path or '-')}</code>"),
        ("ledger id", f"<code>{_e(report.ledger_id or '-')}</code>"),
        ("verified at", _e(report.verified_at or "-")),
        ("agentledger", _e(report.version or "?")),
        ("trusted keys", keys),
        ("checkpoint", checkpoint),
    ]
    return "<dl class=meta>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _chart(report: VerifyReport) -> str:
    """Clean, diverged, missing and no-verdict runs as one stacked bar (inline SVG)."""
    clean, diverged = report.clean_runs, len(report.diverged_runs)
    missing, no_verdict = report.missing_runs, report.no_verdict_runs
    total = max(clean + diverged + missing + no_verdict, 1)
    parts = [("clean", clean, "#1a7f37"), ("diverged", diverged, "#b00020"),
             ("missing", missing, "#9a6700"), ("no verdict", no_verdict, "#d4a72c")]  # fmt: skip
    width, x, bars, legend = 600.0, 0.0, [], []
    for n, (name, count, colour) in enumerate(parts):
        if count:
            w = max(width * count / total, 3.0)
            w = min(w, width - x)
            bars.append(
                f'<rect x="{x:.1f}" y="0" width="{w:.1f}" height="24" fill="{colour}">'
                f"<title>{name}: {count:,}</title></rect>"
            )
            x += w
        legend.append(
            f'<rect x="{n * 150}" y="34" width="12" height="12" fill="{colour}"/>'
            f'<text x="{n * 150 + 18}" y="45" font-size="13">{name} {count:,}</text>'
        )
    return (
        '<svg role="img" aria-label="runs: clean, diverged, missing, no verdict" '
        'viewBox="0 0 600 52" width="600" xmlns="http://www.w3.org/2000/svg">'
        f'<rect x="0" y="0" width="600" height="24" fill="#eee"/>{"".join(bars)}'
        f"{''.join(legend)}</svg>"
    )


def _summary(report: VerifyReport) -> str:
    rate = f", {report.entries / report.elapsed_s:,.0f} entries/s" if report.elapsed_s else ""
    counts = (
        f"<p>{plural(len(report.runs), 'run')}, {plural(report.entries, 'entry', 'entries')}: "
        f"<strong>{report.clean_runs:,}</strong> clean, "
        f"<strong class=status-diverged>{len(report.diverged_runs):,}</strong> diverged, "
        f"<strong>{report.missing_runs:,}</strong> missing; "
        + (
            f"<strong>{report.no_verdict_runs:,}</strong> without a verdict; "
            if report.no_verdict_runs
            else ""
        )
        + f"{plural(report.blobs_checked, 'blob')} re-hashed, "
        f"{report.receipts_checked:,} receipt(s), {report.signatures_checked:,} signature(s), "
        f"{report.audit_records:,} audit record(s); {report.elapsed_s:.2f}s{rate}.</p>"
    )
    by_check = report.findings_by_check()
    if not by_check:
        return counts + _chart(report) + "<p>No findings.</p>"
    rows = "".join(
        f'<tr><td><a href="#check-{anchor(check)}"><code>{_e(check)}</code></a></td>'
        f"<td>{row['runs']:,}</td><td>{'yes' if row['workspace'] else ''}</td>"
        f"<td>{row['findings']:,}</td><td class=means>{_e(explain(check).means)}</td></tr>"
        for check, row in by_check.items()
    )
    if report.findings_not_kept:
        rows += f"<tr><td colspan=5 class=muted>{_e(report.not_kept_words())}</td></tr>"
    return (
        counts
        + _chart(report)
        + f"<h3>{plural(report.findings, 'finding')} by check</h3>"
        + '<table><colgroup><col style="width:24%"><col style="width:8%"><col style="width:11%">'
        '<col style="width:9%"><col></colgroup>'
        "<thead><tr><th>check</th><th>runs</th><th>workspace</th><th>findings</th>"
        f"<th>means</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _finding(divergence: Divergence, where: str | None = None) -> str:
    subject = f" <span class=muted>{_e(divergence.subject)}</span>" if divergence.subject else ""
    place = f"<span class=muted>{_e(where)}</span> " if where else ""
    holds = (
        f"<dt>holds</dt><dd class=holds><code>{_e(divergence.detail)}</code></dd>"
        if divergence.detail
        else ""
    )
    words = f"<p class=says>{_e(divergence.says)}</p>" if divergence.says else ""
    return (
        f'<div class=finding>{place}<a href="#check-{anchor(divergence.check)}">'
        f"<code><strong>{_e(divergence.check)}</strong></code></a>{subject}"
        f"<div class=means>{_e(explain(divergence.check).means)}</div>{words}"
        f"<dl><dt>expected</dt><dd class=expected><code>{_e(_side(divergence.expected))}</code>"
        f"</dd><dt>actual</dt><dd class=actual><code>{_e(_side(divergence.actual))}</code></dd>"
        f"{holds}</dl></div>"
    )


def _side(value: str) -> str:
    """The empty string shown as ``""`` (see ``report.shown_side``)."""
    return '""' if value == "" else value


def _run(verdict: RunVerdict, extra: list[Divergence], status: str) -> str:
    """One failing run; ``status`` is the report's (``VerifyReport.status_of``)."""
    run_anchor = "run-" + anchor(verdict.run_id)
    checks = sorted({d.check for d in [*verdict.divergences, *extra]})
    search = " ".join([verdict.run_id, status, *checks]).lower()
    by_step: dict[int | None, list[Divergence]] = defaultdict(list)
    for divergence in verdict.divergences:
        by_step[divergence.seq].append(divergence)
    steps = []
    if verdict.code == 1:
        why = verdict.not_found or "no such run in this ledger"
        steps.append(f"<p class=status-missing>{_e(why)}</p>")
    for seq in sorted(by_step, key=lambda s: (s is not None, s or 0)):
        step_anchor = "run-" + anchor(verdict.run_id, "run" if seq is None else f"step-{seq}")
        title = "the run" if seq is None else f"step {seq}"
        body = "".join(_finding(d) for d in by_step[seq])
        steps.append(
            f'<section class=step id="{step_anchor}"><h3><a href="#{step_anchor}">{title}</a>'
            f"</h3>{body}</section>"
        )
    if extra:
        body = "".join(_finding(d, None if d.seq is None else f"step {d.seq}") for d in extra)
        steps.append(
            f"<section class=step><h3>workspace findings naming this run</h3>{body}</section>"
        )
    hidden = verdict.divergence_count - len(verdict.divergences)
    if hidden > 0:
        steps.append(f"<p class=muted>… and {hidden:,} more findings (counted, not kept)</p>")
    return (
        f'<details class=run id="{run_anchor}" data-search="{html.escape(safe(search))}">'
        f'<summary><a href="#{run_anchor}">run <code>{_e(verdict.run_id)}</code></a> '
        f"<span class=status-{status}>{status}</span> "
        f"<span class=muted>{plural(verdict.divergence_count + len(extra), 'finding')}, "
        f"{plural(verdict.entries, 'entry', 'entries')}; {_e(', '.join(checks))}</span>"
        f"</summary>{''.join(steps)}</details>"
    )


def _workspace(report: VerifyReport) -> str:
    if not report.workspace:
        return ""
    items = []
    for divergence in report.workspace:
        where = None
        if divergence.run_id is not None:
            where = f"run {divergence.run_id}" + (
                "" if divergence.seq is None else f" step {divergence.seq}"
            )
        items.append(_finding(divergence, where))
    return (
        f'<h2 id="workspace">Workspace ({plural(len(report.workspace), "finding")})</h2>'
        + "".join(items)
    )


def _runs(report: VerifyReport) -> str:
    named: dict[str, list[Divergence]] = defaultdict(list)
    for divergence in report.workspace:
        if divergence.run_id is not None:
            named[divergence.run_id].append(divergence)
    known = {run.run_id for run in report.runs}
    statuses = report.statuses()
    failing = [
        _run(run, named.get(run.run_id, []), statuses[run.run_id])
        for run in report.runs
        if not run.ok or run.run_id in named
    ]
    failing += [_run(RunVerdict(run_id), found, "diverged") for run_id, found in named.items()
                if run_id not in known]  # fmt: skip
    if not failing:
        return '<h2 id="runs">Failing runs</h2><p>None: every run verified clean.</p>'
    return (
        f'<h2 id="runs">Failing runs ({len(failing):,})</h2>'
        '<p><label for="filter">Filter by run id, status or check: </label>'
        '<input id="filter" type="search" placeholder="e.g. run-00042 or entry.hash" '
        'autocomplete="off"> <span class=muted>showing <span id="shown"></span></span></p>'
        + "".join(failing)
    )


def _explanations(report: VerifyReport) -> str:
    return checks_section(
        list(report.findings_by_check()),
        " <em>Expected</em> is shown in the text colour, <em>actual</em> in red. Every check: "
        "<code>agentledger explain</code>, docs/CHECKS.md.",
    )


def checks_section(checks: list[str], note: str = "") -> str:
    """The section "What the checks mean", a row per check found (this report's and the
    fleet's); ``note`` is HTML that follows the rule."""
    if not checks:
        return ""
    rows = "".join(
        f'<tr id="check-{anchor(check)}"><td><code>{_e(check)}</code></td>'
        f"<td>{_e(explain(check).means)}</td><td class=expected>{_e(explain(check).expected)}</td>"
        f"<td class=actual>{_e(explain(check).actual)}</td></tr>"
        for check in checks
    )
    return (
        '<h2 id="checks">What the checks mean</h2>'
        f"<p>{html.escape(RULE[0].upper() + RULE[1:])}{note}</p>"
        '<table><colgroup><col style="width:22%"><col style="width:34%"><col><col></colgroup>'
        "<thead><tr><th>check</th><th>means</th><th>expected</th><th>actual</th></tr></thead>"
        f"<tbody>{rows}</tbody></table>"
    )


def render_html(report: VerifyReport) -> str:
    verdict = report.verdict  # the terminal's and --json's, no-verdict included
    notes = "".join(f"<li>{_e(note)}</li>" for note in report.notes)
    title = f"agentledger verify: {verdict} — {safe(report.ledger_path or 'ledger')}"
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body><main>"
        f"<h1>Verification report <span class='verdict {verdict}'>{verdict}</span></h1>"
        f"{_meta(report)}"
        f'<h2 id="summary">Summary</h2>{_summary(report)}'
        f"{_workspace(report)}{_runs(report)}"
        + (f'<h2 id="notes">Notes</h2><ul>{notes}</ul>' if notes else "")
        + f"{_explanations(report)}"
        f"</main><script>{SCRIPT}</script></body></html>\n"
    )


__all__ = ["anchor", "render_html"]
