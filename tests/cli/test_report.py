"""cpg report (issue 16): the Markdown report pinned by a snapshot, its Mermaid graph drawn by
mermaid itself, and the HTML report opened in a real headless Chromium with the network
blocked."""

from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path
from typing import Any

import pytest

from browsing import MERMAID, missing
from conftest import EXAMPLE, ROOT, cpg


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The example replayed into policies/ with its evidence in .cpg-evidence/ beside it."""
    root = tmp_path_factory.mktemp("review")
    ran = cpg("replay", str(EXAMPLE), "-d", "policies", "--evidence-dir", ".cpg-evidence", cwd=root)
    assert ran.returncode == 0, ran.stderr
    return root


def test_the_markdown_report_of_the_example(replayed: Path, snapshot: Any) -> None:
    first = cpg("report", "-d", "policies", cwd=replayed)
    assert first.returncode == 0, first.stderr
    again = cpg("report", "-d", "policies", "-o", "markdown", cwd=replayed)
    assert again.stdout == first.stdout, "deterministic"
    text = first.stdout
    assert text.count("```mermaid") == 1 and re.search(r"^flowchart (LR|TB)$", text, re.M)
    assert "### shop/cpg-cart" in text and "## Findings" in text
    assert "no stable label" in text and "CT_MAP_INSERTION_FAILED" in text
    assert text == snapshot


def test_the_markdown_report_with_a_plan(replayed: Path) -> None:
    plan = cpg("plan", str(EXAMPLE), "-d", "policies", "-o", "json", cwd=replayed)
    (replayed / "plan.json").write_text(plan.stdout)
    with_plan = cpg("report", "-d", "policies", "--plan", "plan.json", cwd=replayed)
    assert with_plan.returncode == 0, with_plan.stderr
    assert "6 new, 0 changed, 0 unchanged" in with_plan.stdout
    assert "flows would break" in with_plan.stdout
    (replayed / "bad.json").write_text("{}")
    bad = cpg("report", "-d", "policies", "--plan", "bad.json", cwd=replayed)
    assert bad.returncode == 1 and "not the JSON of 'cpg plan -o json'" in bad.stderr
    folder = cpg("report", "-o", "policies/", cwd=replayed)
    assert folder.returncode == 2 and "-o is the output format" in folder.stderr


@pytest.mark.parametrize("budget", [1_500, 3_000, 6_000])
def test_max_size_cuts_at_whole_rows_and_names_what_it_left_out(
    replayed: Path, budget: int
) -> None:
    whole = cpg("report", "-d", "policies", "--max-size", "0", cwd=replayed).stdout
    assert len(whole) > 6_000 and "Cut to stay under" not in whole
    cut = cpg("report", "-d", "policies", "--max-size", str(budget), cwd=replayed)
    assert cut.returncode == 0, cut.stderr
    text = cut.stdout
    assert len(text) <= budget
    note = next(line for line in text.splitlines() if line.startswith("> **Cut to stay under"))
    assert f"under {budget:,} characters" in note
    assert note.endswith("Full report: `cpg report -d policies --max-size 0`")  # copy-safe
    shown = {line for line in text.splitlines() if line.startswith("## ")}
    named = note.split("not shown here: ")[1].split(". Full report")[0].split(", ")
    sections = {
        "readiness": "## Readiness",
        "findings": "## Findings",
        "infrastructure drops": "## Infrastructure and transient drops (no policy fixes these)",
        "coverage": "## Coverage",
        "policies": "## Policies",
        "graphs": "## Allowed traffic",
    }
    for name, heading in sections.items():  # each is shown, cut (named), or left out (named)
        if any(line.startswith(heading) for line in shown):
            assert name not in named, name
        else:
            assert name in named, name
    assert all(n in sections or n.removeprefix("the rest of ") in sections for n in named)
    before_note = text.split("\n> **Cut")[0].rstrip("\n")
    assert whole.startswith(before_note)  # the same report, stopped at a whole row
    assert before_note.count("```") % 2 == 0
    assert before_note.splitlines()[-1].startswith(("|", "```", "Confidence", "**", "#"))
    wide = cpg("report", "-d", "policies", "--max-size", "-1", cwd=replayed)
    assert wide.returncode == 2 and "--max-size" in wide.stderr


def test_the_mermaid_block_renders_in_mermaid(replayed: Path, browser: Any, tmp_path: Path) -> None:
    if not MERMAID.exists():
        missing(f"the mermaid npm package is not at {MERMAID} (.ci/run installs it)")
    text = cpg("report", "-d", "policies", cwd=replayed).stdout
    block = text.split("```mermaid\n", 1)[1].split("\n```", 1)[0]
    page = tmp_path / "mermaid.html"
    page.write_text(
        f'<!DOCTYPE html><html><body><script src="{MERMAID.as_uri()}"></script></body></html>'
    )
    browser.get(page.as_uri())
    result = browser.execute_async_script(
        """
        const [source, done] = arguments;
        mermaid.initialize({startOnLoad: false});
        mermaid.render("graph", source)
          .then(r => done({ok: true, svg: r.svg}))
          .catch(e => done({ok: false, error: String(e && e.message || e)}));
        """,
        block,
    )
    assert result["ok"], result.get("error")
    assert "cart" in result["svg"] and "frontend" in result["svg"]
    broken = browser.execute_async_script(
        """
        const done = arguments[arguments.length - 1];
        mermaid.render("bad", "flowchart LR\\n  a -->|x| ").then(() => done(true), () => done(false));
        """
    )
    assert broken is False, "the check itself notices a broken graph"


def _open(browser: Any, page: Path, html: str) -> None:
    """The page in a 1400×1000 viewport (the size the reports are judged at)."""
    browser.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 1400, "height": 1000, "deviceScaleFactor": 1, "mobile": False},
    )
    page.write_text(html)
    browser.get(page.as_uri())


def _visible(browser: Any, css: str) -> list[Any]:
    found: list[Any] = browser.execute_script(
        "return Array.from(document.querySelectorAll(arguments[0]))"
        ".filter(e => e.closest('g.view').getAttribute('display') !== 'none')",
        css,
    )
    return found


def _classes(element: Any) -> set[str]:
    return set((element.get_attribute("class") or "").split())


def test_the_html_report_in_a_real_browser(replayed: Path, browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    ran = cpg("report", "-d", "policies", "-o", "html", cwd=replayed)
    assert ran.returncode == 0, ran.stderr
    _open(browser, tmp_path / "report.html", ran.stdout)
    header = browser.execute_script("return document.querySelector('header').offsetHeight")
    assert header < 100, f"the header takes {header}px of 1000"
    nodes = {n.get_attribute("data-id") for n in _visible(browser, "g.node")}
    for workload in ("shop/cart", "shop/frontend", "payments/ledger", "monitoring/prometheus"):
        assert f"wl:{workload}" in nodes
    # every drawn edge has its port label (or a collapsed "TCP/9080 +3"); one with no free
    # place is drawn only while its edge is highlighted
    edges = _visible(browser, "path.edge")
    labels = {
        label.get_attribute("data-edge"): label.get_attribute("textContent")
        for label in _visible(browser, "text.port")
    }
    assert edges and all(
        re.fullmatch(r"(\S+/\S+|ICMP type \d+|any)( \+\d+)?", labels[e.get_attribute("data-edge")])
        for e in edges
    ), labels
    # a click highlights the node and its edges, fades the rest, shows the evidence
    cart = browser.find_element(By.CSS_SELECTOR, 'g.node[data-id="wl:shop/cart"]')
    cart.click()
    assert "selected" in _classes(cart)
    touching = [
        e
        for e in edges
        if "wl:shop/cart" in (e.get_attribute("data-source"), e.get_attribute("data-target"))
    ]
    assert touching and all("hot" in _classes(e) for e in touching)
    assert all("faded" in _classes(e) for e in edges if e not in touching)
    panel = browser.find_element(By.ID, "panel").text
    assert "kind: CiliumNetworkPolicy" in panel and "name: cpg-cart" in panel
    assert "ingress TCP/8080 from shop/app=frontend" in panel, "each rule with its evidence"
    assert " UTC" in panel and "000Z" not in panel  # times to the second
    cart.click()  # again: the highlight goes
    assert not any("faded" in _classes(e) for e in edges)
    resources = browser.execute_script("return performance.getEntriesByType('resource').length")
    assert resources == 0, "the report asks the network for nothing"
    # a finding whose subject is no node (an unlabelled pod) highlights its namespace's box
    data = json.loads(browser.find_element(By.ID, "data").get_attribute("textContent"))
    index = next(i for i, f in enumerate(data["findings"]) if not f["nodes"])
    before = browser.find_element(By.ID, "panel").text
    Select(browser.find_element(By.ID, "finding")).select_by_value(str(index))
    hit = [b.get_attribute("data-ns") for b in _visible(browser, "g.box.hit")]
    assert hit == data["findings"][index]["namespaces"] and hit
    panel = browser.find_element(By.ID, "panel").text
    assert panel != before and data["findings"][index]["subject"] in panel
    Select(browser.find_element(By.ID, "finding")).select_by_value("")
    # the namespace filter keeps that namespace and the peers it talks with
    Select(browser.find_element(By.ID, "ns")).select_by_visible_text("payments")
    dimmed = {n.get_attribute("data-id") for n in _visible(browser, "g.node.dim")}
    assert "wl:payments/ledger" not in dimmed
    assert "wl:shop/cart" not in dimmed, "cart talks to payments: it stays"
    assert "wl:shop/frontend" in dimmed, "frontend does not: it fades"
    options = [o.text for o in Select(browser.find_element(By.ID, "ns")).options]
    assert options[0] == "all" and options[1:] == sorted(options[1:])
    shot = tmp_path / "report.png"
    assert browser.save_screenshot(str(shot)) and shot.stat().st_size > 10_000


def test_natural_order_and_the_plan_in_the_html_report(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.ui import Select

    from captures import mesh_capture, new_user_capture

    mesh = mesh_capture(tmp_path / "mesh.jsonl")
    assert cpg("replay", str(mesh), "-d", str(tmp_path / "mesh"), "--no-evidence").returncode == 0
    ran = cpg("report", "-d", str(tmp_path / "mesh"), "-o", "html")
    _open(browser, tmp_path / "mesh.html", ran.stdout)
    options = [o.text for o in Select(browser.find_element(By.ID, "ns")).options]
    assert options.index("bookinfo-2") < options.index("bookinfo-10")
    # would-break traffic from a plan: red and dashed, the reason on hover
    capture = new_user_capture(tmp_path / "all.jsonl")
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    (tmp_path / "plan.json").write_text(
        cpg("plan", str(capture), "-d", str(out), "-o", "json").stdout
    )
    ran = cpg("report", "-d", str(out), "--plan", str(tmp_path / "plan.json"), "-o", "html")
    _open(browser, tmp_path / "plan.html", ran.stdout)
    (breaking,) = _visible(browser, "path.edge.breaks")
    assert breaking.get_attribute("data-source") == "wl:monitoring/prometheus"
    title = breaking.find_element(By.TAG_NAME, "title").get_attribute("textContent")
    assert title.startswith("would break: monitoring/prometheus → bookinfo/reviews TCP/9090")
    assert "default-deny" in title
    style = browser.execute_script(
        "const s = getComputedStyle(arguments[0]); return [s.stroke, s.strokeDasharray]", breaking
    )
    assert style[0] == "rgb(220, 38, 38)" and style[1] != "none"


def test_a_45_policy_report_opens_on_readable_namespaces(browser: Any, tmp_path: Path) -> None:
    from selenium.webdriver.common.by import By

    from captures import mesh_capture

    capture = mesh_capture(tmp_path / "mesh.jsonl")
    out = tmp_path / "policies"
    ran = cpg("replay", str(capture), "-d", str(out), "--no-evidence", "--shared", "0")
    assert ran.returncode == 0
    assert sum(1 for _ in out.rglob("*.yaml")) == 45
    ran = cpg("report", "-d", str(out), "-o", "html")
    _open(browser, tmp_path / "report.html", ran.stdout)
    # 13 namespaces: the report opens on their matrix; the graph is a click away
    assert browser.find_element(By.ID, "matrix").is_displayed()
    browser.find_element(By.ID, "mode").click()
    assert not browser.find_element(By.ID, "matrix").is_displayed()
    assert _visible(browser, "g.view")[0].get_attribute("data-view") == "overview"
    shown = {n.get_attribute("data-id"): n for n in _visible(browser, "g.node")}
    namespaces = {f"ns:bookinfo-{i}" for i in range(1, 11)} | {"ns:monitoring", "ns:kube-system"}
    assert namespaces <= set(shown), sorted(shown)
    canvas = browser.execute_script(
        "const r = document.getElementById('canvas').getBoundingClientRect();"
        "return [r.left, r.top, r.right, r.bottom]"
    )
    smallest = 100.0
    for node_id in namespaces:
        box = browser.execute_script(
            "const r = arguments[0].getBoundingClientRect(); return [r.left, r.top, r.right, r.bottom]",
            shown[node_id],
        )
        inside = (
            box[0] >= canvas[0]
            and box[1] >= canvas[1]
            and box[2] <= canvas[2]
            and box[3] <= canvas[3]
        )
        assert inside, (node_id, box, canvas)
        size = browser.execute_script(
            "return Math.min(...Array.from(arguments[0].querySelectorAll('text')).map(t =>"
            " parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a))",
            shown[node_id],
        )
        smallest = min(smallest, size)
    assert smallest >= 11, f"text drawn at {smallest:.1f}px"
    # a click on a namespace opens its workloads and their peers
    shown["ns:bookinfo-3"].click()
    (view,) = _visible(browser, "g.view")
    assert view.get_attribute("data-view") == "ns:bookinfo-3"
    inside = {n.get_attribute("data-id") for n in _visible(browser, "g.node")}
    assert {f"wl:bookinfo-3/svc-{i}" for i in range(5)} <= inside
    assert "wl:monitoring/prometheus" in inside, "the peers come along"
    browser.find_element(By.ID, "back").click()
    assert _visible(browser, "g.view")[0].get_attribute("data-view") == "overview"


def _mermaid_blocks(text: str) -> list[str]:
    return re.findall(r"```mermaid\n(.*?)\n```", text, re.S)


def test_the_45_policy_markdown_graphs_render_narrow_and_never_hide_workloads(
    browser: Any, tmp_path: Path
) -> None:
    if not MERMAID.exists():
        missing(f"the mermaid npm package is not at {MERMAID} (.ci/run installs it)")
    import yaml

    from captures import mesh_capture
    from cpg_core._reports.graph import traffic_graph

    capture = mesh_capture(tmp_path / "mesh.jsonl")
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    text = cpg("report", "-d", str(out)).stdout
    blocks = _mermaid_blocks(text)
    assert len(blocks) == 13  # the namespaces, and one per namespace
    graph = traffic_graph([yaml.safe_load(p.read_text()) for p in sorted(out.rglob("*.yaml"))])
    workloads: dict[str, int] = {}
    for node in graph.nodes:
        if node.kind == "workload":
            workloads[node.namespace] = workloads.get(node.namespace, 0) + 1
    for block in blocks:
        # a namespace drawn as a node says how many workloads it has…
        for name, count in re.findall(r'\["([\w.-]+)<br/>(\d+) workloads?"\]', block):
            assert workloads[name] == int(count), (name, count)
        # …and a namespace drawn as a box holds them all, or says how many more it has
        for name, body in re.findall(r'subgraph \w+\["([^"]+)"\]\n(.*?)\n  end', block, re.S):
            drawn = len(re.findall(r'^    n\d+\["', body, re.M))
            more = re.search(r"… (\d+) more in", body)
            assert drawn + (int(more.group(1)) if more else 0) == workloads[name], name
    page = tmp_path / "mermaid.html"
    page.write_text(
        f'<!DOCTYPE html><html><body><script src="{MERMAID.as_uri()}"></script></body></html>'
    )
    browser.get(page.as_uri())
    for index, block in enumerate(blocks):
        result = browser.execute_async_script(
            """
            const [source, id, done] = arguments;
            mermaid.initialize({startOnLoad: false});
            mermaid.render(id, source).then(r => {
              const holder = document.createElement("div");
              holder.innerHTML = r.svg;
              done({ok: true, width: parseFloat(holder.querySelector("svg").style.maxWidth)});
            }).catch(e => done({ok: false, error: String(e && e.message || e)}));
            """,
            block,
            f"g{index}",
        )
        assert result["ok"], result.get("error")
        assert result["width"] <= 1600, (index, result["width"])


def test_would_break_traffic_is_drawn_dashed_in_the_markdown_graph(tmp_path: Path) -> None:
    from captures import new_user_capture

    capture = new_user_capture(tmp_path / "all.jsonl")
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    (tmp_path / "plan.json").write_text(
        cpg("plan", str(capture), "-d", str(out), "-o", "json").stdout
    )
    text = cpg("report", "-d", str(out), "--plan", str(tmp_path / "plan.json")).stdout
    (block,) = _mermaid_blocks(text)
    (dashed,) = [line for line in block.splitlines() if "-.->" in line]
    assert '"would break: TCP/9090"' in dashed
    links = [line for line in block.splitlines() if "-->" in line or "-.->" in line]
    assert f"linkStyle {links.index(dashed)} stroke:#dc2626" in block
    assert "Dashed red arrows" in text


def test_a_report_of_1000_policies_renders_within_5_s(browser: Any, tmp_path: Path) -> None:
    import sys

    from selenium.webdriver.common.by import By
    from selenium.webdriver.support.wait import WebDriverWait

    sys.path.insert(0, str(ROOT / "benchmarks"))
    from replay import generate

    capture = tmp_path / "big.jsonl"
    generate(capture, 60_000)
    out = tmp_path / "policies"
    assert (
        cpg(
            "replay", str(capture), "-d", str(out), "--evidence-dir", str(tmp_path / "e")
        ).returncode
        == 0
    )
    # one policy per workload, and the DNS every egress policy has, written once (§D43, §D47)
    assert sum(1 for p in out.rglob("*.yaml") if p.parent.name != "_shared") == 1000
    ran = cpg("report", "-d", str(out), "--evidence-dir", str(tmp_path / "e"), "-o", "html")
    page = tmp_path / "report.html"
    page.write_text(ran.stdout)
    began = time.monotonic()
    browser.get(page.as_uri())
    # Chrome may hand a 10 MB page back before its script has drawn: wait for the drawing
    # (within the budget) rather than count too early. It opens on the matrix of the 40
    # namespaces; the graph shows them as nodes, and a click draws one namespace's workloads
    # and their peers.
    cells = WebDriverWait(browser, 5, poll_frequency=0.05).until(
        lambda driver: driver.execute_script("return document.querySelectorAll('td.cell').length")
    )
    browser.find_element(By.ID, "mode").click()
    count = browser.execute_script(
        "return document.querySelectorAll('g.view:not([display=none]) g.node').length"
    )
    browser.find_element(By.CSS_SELECTOR, "g.node").click()
    shown = browser.execute_script(
        "return document.querySelectorAll('g.view:not([display=none]) g.node.workload').length"
    )
    elapsed = time.monotonic() - began
    json.loads(browser.find_element(By.ID, "data").get_attribute("textContent"))
    shutil.rmtree(out)  # first: the after-test check would lint 1,000 files
    assert cells >= 40 and count >= 40 and shown >= 25, (cells, count, shown)
    assert elapsed < 5, f"{elapsed:.1f} s"


def test_hostile_values_cannot_add_markup_to_the_markdown_report(tmp_path: Path) -> None:
    """A pod name carrying HTML, a link and an @mention ends up escaped; evidence and health
    values without their documented shape are refused as bad documents, not printed."""
    from conftest import endpoint, flow_dict, jsonl

    pod = "web-1 [click](https://evil.test) ![x](https://evil.test/i.png) <img src=x onerror=alert(1)> @alice"
    unlabelled = {"namespace": "shop", "pod_name": pod}
    capture = tmp_path / "hostile.jsonl"
    capture.write_text(jsonl([flow_dict(unlabelled, endpoint("shop", "api")), flow_dict()]))
    out = tmp_path / "policies"
    evidence = tmp_path / "evidence"
    assert (
        cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence)).returncode == 0
    )
    clean = cpg("report", "-d", str(out), "--evidence-dir", str(evidence))
    assert clean.returncode == 0, clean.stderr
    markdown = clean.stdout
    assert "&#64;alice" in markdown  # the finding is there, escaped
    assert "<img" not in markdown and not re.search(r"(?<!\\)\]\(", markdown)  # no link
    assert "![" not in markdown and "@alice" not in markdown
    (doc_path, *_) = sorted(evidence.rglob("cart.json"))
    doc = json.loads(doc_path.read_text())
    doc["rules"][0]["first_seen"] = "2026-11-02T10:00:00Z\n## Pwned"
    doc_path.write_text(json.dumps(doc))
    (health_path,) = evidence.rglob("cluster-health.json")
    health = json.loads(health_path.read_text())
    health["drops"] = [{"reason": "X", "class": "infra | <b>bold</b>", "count": 1}]
    health_path.write_text(json.dumps(health))
    ran = cpg("report", "-d", str(out), "--evidence-dir", str(evidence))
    assert ran.returncode == 0, ran.stderr
    assert "## Pwned" not in ran.stdout and "<b>" not in ran.stdout
    assert f"{doc_path}" in ran.stderr and "first_seen" in ran.stderr
    assert "class 'infra | <b>bold</b>' is not a drop class" in ran.stderr


def test_a_folder_without_policies_draws_no_empty_graph(tmp_path: Path) -> None:
    (tmp_path / "policies").mkdir()
    text = cpg("report", "-d", str(tmp_path / "policies")).stdout
    assert "```mermaid" not in text, "mermaid refuses a flowchart with nothing in it"
    assert "None: no policy in the folder allows any traffic." in text
    html = cpg("report", "-d", str(tmp_path / "policies"), "-o", "html")
    assert html.returncode == 0 and "0 policies · 0 nodes · 0 connections" in html.stdout


def test_a_mermaid_directive_in_a_name_never_reaches_the_graph(tmp_path: Path) -> None:
    """Mermaid reads a ``%%{init: …}%%`` directive anywhere in the text (and ``%%`` starts a
    comment): one in a label of a policy in the folder passed into the graph. It is written
    as entity codes now; the only directive is cpg's own, first in each block."""
    import yaml

    hostile = 'web %%{init: {"theme": "dark"}}%% #x'
    policy = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {
            "endpointSelector": {"matchLabels": {"app": "api"}},
            "ingress": [
                {
                    "fromEndpoints": [{"matchLabels": {"app": hostile}}],
                    "toPorts": [{"ports": [{"port": "80", "protocol": "TCP"}]}],
                }
            ],
        },
    }
    folder = tmp_path / "not-a-policy-folder"
    (folder / "shop").mkdir(parents=True)
    (folder / "shop" / "not-a-policy-api.yaml").write_text(yaml.safe_dump(policy))
    ran = cpg("report", "-d", str(folder))
    assert ran.returncode == 0, ran.stderr
    blocks = _mermaid_blocks(ran.stdout)
    assert blocks
    for block in blocks:
        first, *rest = block.splitlines()
        assert first.startswith("%%{init:") and "%%" not in "\n".join(rest)
    assert "web #37;#37;{init" in ran.stdout
