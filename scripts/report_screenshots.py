"""Screenshots of ``cpg report -o html`` on synthetic clusters of 10, 45 and 500 workloads
(``benchmarks/synthetic.py``), as a reviewer sees them: headless Chromium at 1600×1000.

    python scripts/report_screenshots.py [OUT_DIR] [SIZES...]     (docs, 10 45 500)

``report-example.png`` is the example capture's, shop/cart selected. Each size gives
``report-<N>-workloads.png`` (the page as it opens) and, when the report
opens on its matrix, ``report-<N>-workloads-pair.png`` (the last red cell opened, and a red cell of it clicked: why
and the fix) and
``report-<N>-workloads-graph.png`` (the graph view, namespace app-02 opened). It prints how
long each page took to load. Needs Debian's chromium and
chromium-driver, and selenium (the test extras).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))

from synthetic import synthetic_capture  # noqa: E402

CPG = str(Path(sys.executable).with_name("cpg"))


def _page(work: Path, capture: Path, name: str) -> Path:
    """The HTML report a reviewer opens: the capture replayed, planned, and reported with
    its plan (files named after ``name`` in ``work``)."""
    common = ["-d", str(work / f"policies-{name}"), "--evidence-dir", str(work / f"ev-{name}")]
    subprocess.run([CPG, "replay", str(capture), *common, "-q"], check=True, capture_output=True)
    plan = work / f"plan-{name}.json"
    ran = subprocess.run(
        [CPG, "plan", str(capture), *common, "-o", "json"], capture_output=True, text=True
    )
    plan.write_text(ran.stdout)
    page = work / f"report-{name}.html"
    ran = subprocess.run(
        [CPG, "report", *common, "--plan", str(plan), "-o", "html"],
        capture_output=True,
        text=True,
        check=True,
    )
    page.write_text(ran.stdout)
    return page


def _report(work: Path, workloads: int) -> Path:
    capture = synthetic_capture(work / f"cluster-{workloads}.jsonl", workloads)
    return _page(work, capture, str(workloads))


def _example(work: Path) -> Path:
    """The example capture's report, with its plan."""
    return _page(work, ROOT / "examples" / "drops.jsonl", "example")


def _browser():  # type: ignore[no-untyped-def]
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = "/usr/bin/chromium"
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
        "--host-resolver-rules=MAP * ~NOTFOUND",
        "--window-size=1600,1000",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service("/usr/bin/chromedriver"), options=options)
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1600, "height": 1000, "deviceScaleFactor": 1, "mobile": False},
    )
    return driver


def main(argv: list[str]) -> int:
    out = Path(argv[0]) if argv else ROOT / "docs"
    sizes = [int(a) for a in argv[1:]] or [10, 45, 500]
    from selenium.webdriver.common.action_chains import ActionChains

    browser = _browser()
    try:
        with tempfile.TemporaryDirectory() as tmp:
            browser.get(_example(Path(tmp)).as_uri())
            browser.find_element("css selector", 'g.node[data-id="wl:shop/cart"]').click()
            shot = out / "report-example.png"
            browser.save_screenshot(str(shot))
            print(f"the example, cart selected -> {shot}")
            for workloads in sizes:
                page = _report(Path(tmp), workloads)
                began = time.monotonic()
                browser.get(page.as_uri())
                browser.execute_script("return document.readyState")
                elapsed = time.monotonic() - began
                shot = out / f"report-{workloads}-workloads.png"
                browser.save_screenshot(str(shot))
                print(f"{workloads} workloads: loaded in {elapsed:.2f} s -> {shot}")
                cells = browser.find_elements("css selector", "td.cell.breaks")
                if cells and cells[0].is_displayed():
                    cells[-1].click()
                    # a red cell of the pair: why it breaks and the fix, in the side panel
                    browser.find_element("css selector", "#pair td.cell.breaks").click()
                    pair = out / f"report-{workloads}-workloads-pair.png"
                    browser.save_screenshot(str(pair))
                    print(f"{workloads} workloads: a pair opened -> {pair}")
                    browser.find_element("id", "pair-back").click()
                    browser.find_element("id", "mode").click()
                    browser.find_element("css selector", 'g.node[data-id="ns:app-02"]').click()
                    ActionChains(browser).move_to_element(
                        browser.find_element("tag name", "header")
                    ).perform()  # no hover
                    graph = out / f"report-{workloads}-workloads-graph.png"
                    browser.save_screenshot(str(graph))
                    print(f"{workloads} workloads: namespace app-02 in the graph -> {graph}")
    finally:
        browser.quit()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
