"""The HTML report in a real browser: Debian's chromium, headless, driven by playwright.

Never a downloaded browser: ``/usr/bin/chromium`` (``make test`` installs it when missing).
Without it the launch fails and so does this module: it never skips. One browser for the
module; each test opens a page on a report file and asserts on the rendered DOM.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, Route, ViewportSize, sync_playwright

from agentledger.report_html import render_html
from tests.report.conftest import Demo, as_json
from tests.report.test_report import _many_runs

CHROMIUM = "/usr/bin/chromium"
VIEWPORT: ViewportSize = {"width": 1000, "height": 900}


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=CHROMIUM, headless=True)
        try:
            yield launched
        finally:
            launched.close()


def open_report(browser: Browser, path: Path, requests: list[str]) -> Page:
    """The report at 1000 px; any request that is not the file itself is recorded and refused."""
    page = browser.new_page(viewport=VIEWPORT)

    def offline(route: Route) -> None:
        if route.request.url == path.as_uri():
            route.continue_()
        else:
            requests.append(route.request.url)
            route.abort()

    page.route("**/*", offline)
    page.goto(path.as_uri())
    return page


def _shown_runs(page: Page) -> list[str]:
    ids: list[str] = page.evaluate(
        "[...document.querySelectorAll('details.run')].filter(d => !d.hidden).map(d => d.id)"
    )
    return ids


def test_the_demo_report_in_chromium_at_1000px(
    browser: Browser, demo: Demo, demo_cli: Any, tmp_path: Path
) -> None:
    report_file = tmp_path / "report.html"
    code, out, _ = demo_cli("verify", "--json", "--html", str(report_file))
    assert code == 2
    report = as_json(out)
    failing = {f["run"] for f in report["failures"]}
    failing |= {d["run"] for d in report["workspace"] if d["run"]}
    requests: list[str] = []
    page = open_report(browser, report_file, requests)
    assert page.title().startswith("agentledger verify: diverged")
    assert {run.removeprefix("run-") for run in _shown_runs(page)} == failing
    text = page.inner_text("body")
    assert report["ledger"]["id"] in text and report["version"] in text
    assert "entry.hash" in page.inner_text("#summary ~ table")
    assert page.locator("svg").count() == 1
    # Open every run: the longest lines (hashes, bodies) wrap, nothing scrolls sideways.
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1000
    edited = demo.run("entry.hash")
    assert page.locator(f'[id="run-{edited}:step-3"]').is_visible()
    page.screenshot(path=str(tmp_path / "report-1000px.png"), full_page=True)
    assert (tmp_path / "report-1000px.png").stat().st_size > 10_000
    # The filter box works offline: only the matching run stays.
    page.fill("#filter", edited)
    assert _shown_runs(page) == [f"run-{edited}"]
    assert page.inner_text("#shown") == f"1 of {len(failing)}"
    page.fill("#filter", "chain.gap")
    assert _shown_runs(page) == [f"run-{demo.run('chain.gap')}"]
    page.fill("#filter", "")
    assert len(_shown_runs(page)) == len(failing)
    assert requests == []  # standalone: nothing fetched from the network
    page.close()


def test_hundreds_of_failing_runs_are_all_there_and_fit_1000px(
    browser: Browser, tmp_path: Path
) -> None:
    report = _many_runs(1_000)
    report_file = tmp_path / "many.html"
    report_file.write_text(render_html(report), encoding="utf-8")
    requests: list[str] = []
    page = open_report(browser, report_file, requests)
    assert len(_shown_runs(page)) == 201
    page.evaluate("document.querySelectorAll('details').forEach(d => d.open = true)")
    assert page.evaluate("document.documentElement.scrollWidth") <= 1000
    page.fill("#filter", "run-000150")
    assert _shown_runs(page) == ["run-run-000150"]
    page.goto(report_file.as_uri() + "#run-run-000007:step-3")
    assert page.evaluate("document.getElementById('run-run-000007').open") is True
    assert requests == []
    page.close()
