"""The fleet report as one standalone HTML document, in the single-workspace report's style.

The same stylesheet, filter script and finding layout as ``report_html`` (no network; long
hashes wrap): what was verified and where, the summary with findings counted by check, every
failing file as a collapsible section (its first findings, or its error), the clean files,
and what each check means. Every string from a file or the cluster goes through
``display.safe`` and then ``html.escape``.
"""

from __future__ import annotations

import html
from typing import Any

from agentledger.checks import explain
from agentledger.display import plural, safe
from agentledger.fleet.summary import CLEAN, DIVERGED, UNREADABLE, FleetReport, LedgerSummary
from agentledger.report_html import SCRIPT, STYLE, anchor, checks_section

VERDICT_CLASS = {CLEAN: "clean", DIVERGED: "diverged", UNREADABLE: "missing"}
"""The workspace report's badge colours: green, red, and yellow for what could not be read."""


def _e(value: object) -> str:
    return html.escape(safe(value), quote=True)


def _meta(report: FleetReport) -> str:
    where = "a local cluster" if report.local_cluster else "a running scheduler"
    workers = f"{report.workers:,} seen"
    if report.workers_lost:
        workers += (
            f", <span class=actual>{report.workers_lost:,} lost while tasks ran</span> "
            "(their tasks rerun elsewhere)"
        )
    keys = "".join(f"<div><code>{_e(key)}</code></div>" for key in report.trusted) or (
        "<span class=muted>no keys</span>"
    )
    lost = f" <span class=actual>({report.lost:,} lost)</span>" if report.lost else ""
    verdicts = f"{len(report.ledgers):,} of {report.inputs:,} inputs" + (lost or " (nothing lost)")
    rows = [
        ("cluster", f"{where} <code>{_e(report.scheduler or '-')}</code>"),
        ("workers", workers),
        ("verdicts", verdicts),
        ("trusted keys", keys),
        ("time", f"{report.elapsed_s:.2f}s"),
    ]
    return "<dl class=meta>" + "".join(f"<dt>{k}</dt><dd>{v}</dd>" for k, v in rows) + "</dl>"


def _summary(report: FleetReport) -> str:
    totals: dict[str, Any] = report.to_json()["totals"]
    counts = (
        f"<p>{plural(len(report.ledgers), 'file')}: "
        f"<strong>{report.count(CLEAN):,}</strong> clean, "
        f"<strong class=status-diverged>{report.count(DIVERGED):,}</strong> diverged, "
        f"<strong class=status-missing>{report.count(UNREADABLE):,}</strong> unreadable; "
        f"{plural(totals['runs'], 'run')}, {plural(totals['entries'], 'entry', 'entries')}, "
        f"{totals['bytes_read']:,} bytes read.</p>"
    )
    by_check = report.by_check()
    if not by_check:
        return counts + "<p>No findings.</p>"
    rows = "".join(
        f'<tr><td><a href="#check-{anchor(check)}"><code>{_e(check)}</code></a></td>'
        f"<td>{sum(1 for ledger in report.ledgers if check in ledger.checks):,}</td>"
        f"<td>{count:,}</td><td class=means>{_e(explain(check).means)}</td></tr>"
        for check, count in by_check.items()
    )
    if report.findings_not_kept:
        rows += f"<tr><td colspan=4 class=muted>{_e(report.not_kept_words())}</td></tr>"
    return (
        counts
        + "<h3>Findings by check</h3>"
        + '<table><colgroup><col style="width:26%"><col style="width:9%"><col style="width:10%">'
        "<col></colgroup><thead><tr><th>check</th><th>files</th><th>findings</th>"
        f"<th>means</th></tr></thead><tbody>{rows}</tbody></table>"
    )


def _finding(finding: dict[str, Any]) -> str:
    where = " ".join(
        part
        for part in (
            f"run {finding['run']}" if finding.get("run") else "",
            f"step {finding['seq']}" if finding.get("seq") is not None else "",
        )
        if part
    )
    subject = finding.get("subject")
    subject = f" <span class=muted>{_e(subject)}</span>" if subject else ""
    check = str(finding["check"])
    return (
        f"<div class=finding><span class=muted>{_e(where)}</span> "
        f'<a href="#check-{anchor(check)}"><code><strong>{_e(check)}</strong></code></a>{subject}'
        f"<div class=means>{_e(explain(check).means)}</div>"
        f"<dl><dt>expected</dt><dd class=expected><code>{_e(finding['expected'])}</code></dd>"
        f"<dt>actual</dt><dd class=actual><code>{_e(finding['actual'])}</code></dd></dl></div>"
    )


def _file(ledger: LedgerSummary) -> str:
    status_class = "status-diverged" if ledger.status == DIVERGED else "status-missing"
    search = " ".join([ledger.path, ledger.status, ledger.ledger_id or "", *ledger.checks])
    if ledger.error is not None:
        body = (
            f"<div class=finding><code><strong>{_e(ledger.error_code or 'error')}</strong></code>"
            f"<dl><dt>error</dt><dd class=actual><code>{_e(ledger.error)}</code></dd></dl></div>"
        )
    else:
        body = "".join(_finding(finding) for finding in ledger.findings)
        if ledger.divergences > len(ledger.findings):
            body += (
                f"<p class=muted>… {ledger.divergences - len(ledger.findings):,} more "
                "(verify this file alone for every finding)</p>"
            )
    facts = (
        f"ledger <code>{_e(ledger.ledger_id or '-')}</code>"
        + (" (sealed archive)" if ledger.archive else "")
        + f", {plural(ledger.runs, 'run')}, {plural(ledger.entries, 'entry', 'entries')}, "
        f"{ledger.elapsed_s:.2f}s on <code>{_e(ledger.worker or '-')}</code>"
    )
    return (
        f'<details class=run id="file-{anchor(ledger.path)}" data-search="{_e(search.lower())}">'
        f"<summary><code>{_e(ledger.path)}</code> <span class={status_class}>"
        f"{_e(ledger.status)}</span> <span class=muted>"
        f"{plural(ledger.divergences, 'finding')}</span></summary>"
        f"<p class=muted>{facts}</p>{body}</details>"
    )


def _files(report: FleetReport) -> str:
    failing = [ledger for ledger in report.worst_first() if not ledger.ok]
    clean = [ledger for ledger in report.ledgers if ledger.ok]
    if failing:
        part = (
            f'<h2 id="files">Failing files, worst first ({len(failing):,})</h2>'
            '<p><label for="filter">Filter by path, status, ledger id or check: </label>'
            '<input id="filter" type="search" placeholder="e.g. ws-12 or entry.hash" '
            'autocomplete="off"> <span class=muted>showing <span id="shown"></span></span></p>'
            + "".join(_file(ledger) for ledger in failing)
        )
    else:
        part = '<h2 id="files">Failing files</h2><p>None: every file verified clean.</p>'
    if clean:
        rows = "".join(
            f"<tr><td><code>{_e(ledger.path)}</code></td><td><code>"
            f"{_e(ledger.ledger_id or '-')}</code></td><td>{ledger.entries:,}</td></tr>"
            for ledger in clean
        )
        part += (
            f'<h2 id="clean">Clean files ({len(clean):,})</h2>'
            '<table><colgroup><col style="width:55%"><col style="width:30%"><col></colgroup>'
            "<thead><tr><th>file</th><th>ledger id</th><th>entries</th></tr></thead>"
            f"<tbody>{rows}</tbody></table>"
        )
    return part


def _explanations(report: FleetReport) -> str:
    return checks_section(list(report.by_check()))


def render_fleet_html(report: FleetReport) -> str:
    verdict = CLEAN if report.code == 0 else DIVERGED
    notes = "".join(f"<li>{_e(note)}</li>" for note in report.notes)
    return (
        "<!DOCTYPE html>\n<html lang=en><head><meta charset=utf-8>"
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>agentledger fleet verify: {verdict}</title><style>{STYLE}</style></head>"
        f"<body><main><h1>Fleet verification report "
        f"<span class='verdict {VERDICT_CLASS[verdict]}'>{verdict}</span></h1>"
        f"{_meta(report)}"
        f'<h2 id="summary">Summary</h2>{_summary(report)}'
        f"{_files(report)}"
        + (f'<h2 id="notes">Notes</h2><ul>{notes}</ul>' if notes else "")
        + f"{_explanations(report)}"
        f"</main><script>{SCRIPT}</script></body></html>\n"
    )


__all__ = ["render_fleet_html"]
