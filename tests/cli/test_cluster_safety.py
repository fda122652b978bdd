"""Safe for the cluster, not only for the capture (ARCHITECTURE §D47, §D48): what cpg writes
keeps working for the traffic a capture did not hold (a new namespace's DNS, a new workload a
scraper must reach, a name never looked up), and a person's policy is never changed."""

from __future__ import annotations

import json
import os
import shutil
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import CORPUS, EXAMPLE, ROOT, cpg, endpoint, flow_dict, jsonl

sys.path.insert(0, str(ROOT / "benchmarks"))
from synthetic import endpoints, synthetic_capture

TCP = CORPUS / "hubble-otel__basic-sample-400-tcp-flows.json"
HTTP = CORPUS / "hubble-otel__basic-sample-348-http-flows.json"
DNS = CORPUS / "hubble-otel__basic-sample-330-dns-flows.json"


def _corpus() -> None:
    if not CORPUS.exists():
        if os.environ.get("CPG_REQUIRE_SHARED") == "1":
            raise AssertionError(f"{CORPUS} is missing, and CPG_REQUIRE_SHARED=1")
        pytest.skip("../shared/corpus is absent")


def traced(folder: Path, *flows: tuple[str, str, str]) -> list[bool]:
    """Whether the policies in ``folder`` admit each flow (source, destination, port) at
    both ends, as ``cpg trace`` judges it (one read of the folder for all of them)."""
    from cpg_core import CheckRequest
    from cpg_core.why import traced_flows
    from cpg_io import runs

    request = CheckRequest.build(inputs=["-"], policies=str(folder))
    sides = [traced_flows(*flow) for flow in flows]
    answers = runs.trace_run(request, [f for side in sides for f in side]).view.answers
    verdicts, at = [], 0
    for side in sides:
        verdicts.append(all(answer.allowed for answer in answers[at : at + len(side)]))
        at += len(side)
    return verdicts


def trace_cli(folder: Path, source: str, destination: str, port: str, *more: str) -> int:
    return cpg(
        "trace", "-d", str(folder), "--from", source, "--to", destination, "--port", port, *more
    ).returncode


def egress_workloads(folder: Path) -> list[str]:
    """``ns:key=value`` of the pods each workload policy with egress rules selects."""
    found = []
    for path in folder.rglob("*.yaml"):
        doc = yaml.safe_load(path.read_text())
        if doc.get("kind") == "CiliumNetworkPolicy" and doc["spec"].get("egress"):
            labels = doc["spec"]["endpointSelector"]["matchLabels"]
            selector = ",".join(f"{k}={v}" for k, v in sorted(labels.items()))
            found.append(f"{doc['metadata']['namespace']}:{selector}")
    return sorted(found)


# --- the synthetic cluster ----------------------------------------------------------------------


@pytest.fixture(scope="module")
def synthetic(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("synthetic")
    capture = synthetic_capture(root / "c.jsonl", 500)
    out = root / "policies"
    ran = cpg("replay", str(capture), "-d", str(out), "--no-evidence", "-o", "json")
    assert ran.returncode == 0, ran.stderr
    (root / "report.json").write_text(ran.stdout)
    yield out


def test_the_cluster_dns_serves_a_namespace_the_capture_never_saw(synthetic: Path) -> None:
    dns = "kube-system:app=kube-dns"
    for port in ("53/UDP", "53/TCP"):
        assert trace_cli(synthetic, "brand-new:app=thing", dns, port) == 0, port
    kube_dns = yaml.safe_load((synthetic / "kube-system" / "kube-dns.yaml").read_text())
    assert kube_dns["spec"]["ingress"] == [
        {
            "fromEntities": ["cluster"],
            "toPorts": [
                {"ports": [{"port": "53", "protocol": "TCP"}, {"port": "53", "protocol": "UDP"}]}
            ],
        }
    ], "one rule for the whole cluster, not 500 callers"
    assert len((synthetic / "kube-system" / "kube-dns.yaml").read_text().splitlines()) < 30
    # ... and it still admits no other port
    assert trace_cli(synthetic, "brand-new:app=thing", dns, "8080/TCP") == 3


def test_every_workload_in_egress_default_deny_resolves_on_udp_and_tcp(synthetic: Path) -> None:
    workloads = [
        f"{e['namespace']}:app={e['labels'][0].split('=', 1)[1]}"
        for _ns, members in endpoints(500)
        for e in members
    ]
    workloads += ["monitoring:app=prometheus", "ingress-nginx:app=controller"]
    dns = "kube-system:app=kube-dns"
    flows = [(w, dns, port) for w in workloads for port in ("53/UDP", "53/TCP")]
    verdicts = traced(synthetic, *flows)
    assert all(verdicts), [f for f, ok in zip(flows, verdicts, strict=True) if not ok][:5]
    # they are policed for egress (a workload without egress rules would pass trivially)
    assert not all(traced(synthetic, *[(w, "other:app=x", "9999/TCP") for w in workloads]))
    assert not any(traced(synthetic, *[(w, "other:app=x", "9999/TCP") for w in workloads[:50]]))


def test_the_scraper_and_the_ingress_controller_reach_new_workloads(synthetic: Path) -> None:
    assert trace_cli(synthetic, "monitoring:app=prometheus", "app-99:app=new", "9090/TCP") == 0
    assert trace_cli(synthetic, "ingress-nginx:app=controller", "app-99:app=web", "8080/TCP") == 0
    # on the ports they use only
    assert trace_cli(synthetic, "monitoring:app=prometheus", "app-99:app=new", "22/TCP") == 3
    assert trace_cli(synthetic, "ingress-nginx:app=controller", "app-99:app=web", "22/TCP") == 3
    report = json.loads((synthetic.parent / "report.json").read_text())
    services = {
        (s["namespace"], s["workload"], s["direction"], tuple(s["ports"]))
        for s in report["cluster_scope"]["services"]
    }
    assert services == {
        ("kube-system", "kube-dns", "ingress", ("UDP/53", "TCP/53")),
        ("monitoring", "prometheus", "egress", ("TCP/9090",)),
        ("ingress-nginx", "controller", "egress", ("TCP/8080",)),
    }


def test_the_summary_names_each_cluster_service_and_how_to_narrow_it(tmp_path: Path) -> None:
    capture = synthetic_capture(tmp_path / "c.jsonl", 45)
    ran = cpg("replay", str(capture), "-d", str(tmp_path / "p"), "--no-evidence")
    assert "Written for the cluster, not only for the capture:" in ran.stdout
    assert "monitoring/prometheus TCP/9090: a client of 7 namespaces" in ran.stdout
    assert "only today's peers: --exact-peers monitoring/prometheus" in ran.stdout
    assert "kube-system/kube-dns UDP/53, TCP/53: the cluster's DNS" in ran.stdout
    # asked for, the scraper is written with exactly the peers it had
    exact = tmp_path / "exact"
    ran = cpg(
        "replay",
        str(capture),
        "-d",
        str(exact),
        "--no-evidence",
        "--exact-peers",
        "monitoring/prometheus",
    )
    assert ran.returncode == 0, ran.stderr
    scraper = (exact / "monitoring" / "prometheus.yaml").read_text()
    assert "toEntities" not in scraper and scraper.count("toEndpoints") >= 45
    assert trace_cli(exact, "monitoring:app=prometheus", "app-99:app=new", "9090/TCP") == 3
    assert trace_cli(exact, "brand-new:app=thing", "kube-system:app=kube-dns", "53/UDP") == 0
    # and the threshold moves the line: 0 keeps only the DNS service
    zero = tmp_path / "zero"
    cpg(
        "replay",
        str(capture),
        "-d",
        str(zero),
        "--no-evidence",
        "--cluster-service-namespaces",
        "0",
    )
    assert "toEntities" not in (zero / "monitoring" / "prometheus.yaml").read_text()
    assert "fromEntities" in (zero / "kube-system" / "kube-dns.yaml").read_text()
    assert cpg("replay", str(capture), "--cluster-service-namespaces", "-1").returncode == 2
    bad = cpg("replay", str(capture), "--exact-peers", "prometheus")
    assert bad.returncode == 2 and "NAMESPACE/WORKLOAD" in bad.stderr


def test_a_rerun_folds_per_caller_rules_into_the_cluster_rule(tmp_path: Path) -> None:
    """A folder written before (per caller, by an older cpg or with --exact-peers) is folded
    into the cluster rule when the service is one; the file stays cpg's to merge."""
    capture = synthetic_capture(tmp_path / "c.jsonl", 45)
    out = tmp_path / "p"
    common = [str(capture), "-d", str(out), "--no-evidence"]
    cpg("replay", *common, "--exact-peers", "kube-system/kube-dns", "--include-system-namespaces")
    before = (out / "kube-system" / "kube-dns.yaml").read_text()
    assert before.count("fromEndpoints") == 45  # every caller
    cpg("replay", *common)
    after = yaml.safe_load((out / "kube-system" / "kube-dns.yaml").read_text())
    assert [list(rule) for rule in after["spec"]["ingress"]] == [["fromEntities", "toPorts"]]
    again = cpg("replay", *common)
    assert "0 created, 0 updated" in again.stdout


# --- the real captures --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def learned_tcp(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _corpus()
    out = tmp_path_factory.mktemp("tcp") / "policies"
    ran = cpg("replay", str(TCP), "--learn", "forwarded", "-d", str(out), "--no-evidence")
    assert ran.returncode == 0, ran.stderr
    return out


@pytest.fixture(scope="module")
def learned_l7(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _corpus()
    root = tmp_path_factory.mktemp("l7")
    for name, extra in (("policies", ()), ("with-system", ("--include-system-namespaces",))):
        ran = cpg(
            "replay",
            str(HTTP),
            str(DNS),
            "--learn",
            "forwarded",
            "--l7",
            "-d",
            str(root / name),
            "--no-evidence",
            *extra,
        )
        assert ran.returncode == 0, ran.stderr
    return root / "policies"


@pytest.mark.parametrize("capture", ["tcp", "l7"])
def test_on_real_captures_every_egress_policy_and_every_new_pod_resolves(
    capture: str, request: pytest.FixtureRequest
) -> None:
    folder: Path = request.getfixturevalue(f"learned_{capture}")
    workloads = egress_workloads(folder)
    if capture == "tcp":  # the policies the issue found resolving nothing
        assert {"bookinfo:app=productpage", "bookinfo:app=ratings", "bookinfo:app=reviews"} <= set(
            workloads
        )
    else:
        assert workloads, "the L7 captures give egress policies too"
    dns = "kube-system:k8s-app=kube-dns"
    flows = [
        (w, dns, port) for w in [*workloads, "brand-new:app=x"] for port in ("53/UDP", "53/TCP")
    ]
    verdicts = traced(folder, *flows)
    assert all(verdicts), [f for f, ok in zip(flows, verdicts, strict=True) if not ok]
    for workload in workloads:
        assert trace_cli(folder, workload, "other:app=x", "9999/TCP") == 3, workload
    if capture == "l7":  # and with L7, a name the capture never saw resolves
        for workload in workloads:
            assert (
                trace_cli(folder, workload, dns, "53/UDP", "--dns", "never-seen.example.org") == 0
            )


def test_the_dns_forwarder_reaches_its_upstream_for_any_name(learned_l7: Path) -> None:
    forwarder, upstream = "kube-system:k8s-app=node-local-dns", "kube-system:k8s-app=kube-dns"
    for folder in (learned_l7, learned_l7.parent / "with-system"):
        for port in ("53/UDP", "53/TCP"):
            assert (
                trace_cli(folder, forwarder, upstream, port, "--dns", "never-seen.example.org") == 0
            ), (folder.name, port)
    # by default a system namespace's workload gets no policy of its own; asked for, the
    # forwarder's is every name, never the 26 it forwarded
    assert not (learned_l7 / "kube-system" / "node-local-dns.yaml").exists()
    policy = yaml.safe_load(
        (learned_l7.parent / "with-system" / "kube-system" / "node-local-dns.yaml").read_text()
    )
    dns_rules = [
        r["toPorts"][0]["rules"]["dns"]
        for r in policy["spec"]["egress"]
        if "rules" in r["toPorts"][0]
    ]
    assert dns_rules == [[{"matchPattern": "*"}]]


def test_a_system_namespace_is_reported_and_verify_leaves_it_to_you(tmp_path: Path) -> None:
    _corpus()
    out = tmp_path / "p"
    ran = cpg(
        "replay",
        str(DNS),
        "--learn",
        "forwarded",
        "--l7",
        "-d",
        str(out),
        "--no-evidence",
        "--verify",
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "kube-system/node-local-dns: 1 rule (165 flows) not written" in ran.stdout
    assert "--include-system-namespaces writes them" in ran.stdout
    assert "165 candidates of system-namespace workloads not admitted" in ran.stdout
    checked = cpg("verify", str(DNS), "-d", str(out), "--learn", "forwarded", "-o", "json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["system_namespaces"] == 165
    strict = cpg(
        "verify", str(DNS), "-d", str(out), "--learn", "forwarded", "--include-system-namespaces"
    )
    assert strict.returncode == 3, "asked to, verify counts them as misses"


def test_live_flushes_decide_as_one_replay(tmp_path: Path) -> None:
    """A live session plans a few targets per flush; the cluster decisions need the whole
    session's knowledge, which the reach index keeps: flushes after every flow write what
    one replay writes."""
    from cpg_core import AggregateOptions, Aggregator, parse_flow
    from cpg_core._synthesis.render import render_policy

    dns = endpoint("kube-system", "kube-dns")
    callers = [endpoint(f"ns-{i}", "app") for i in range(6)]
    records = [
        flow_dict(src=c, dst=dns, direction=way, udp=53)
        for c in callers
        for way in ("EGRESS", "INGRESS")
    ]

    def rendered(plans: Any) -> dict[str, str]:
        return {
            f"{p.namespace}/{p.workload}": render_policy(
                p.name, p.namespace, p.target.selector, p.rules
            )
            for p in plans
        }

    whole = Aggregator(AggregateOptions())
    for record in records:
        whole.add(parse_flow(record))
    once = rendered(whole.plans())
    live = Aggregator(AggregateOptions())
    last: dict[str, str] = {}
    for record in records:
        live.add(parse_flow(record))
        drained = live.drain(live.take_new_targets())
        attribution = live.resolved(drained)
        last.update(rendered(live.plans(attribution, live.reach(attribution))))
    assert last["kube-system/kube-dns"] == once["kube-system/kube-dns"]
    assert "fromEntities" in once["kube-system/kube-dns"]


# --- a person's policy ----------------------------------------------------------------------------

HAND = """\
# mine: cpg must not touch it
apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: cart-hand
  namespace: shop
spec:
  endpointSelector:
    matchLabels:
      app: cart
  ingress:
  - fromEndpoints:
    - matchLabels:
        app: frontend
    toPorts:
    - ports:
      - port: "8080"
        protocol: TCP
"""


@pytest.fixture
def hand_folder(tmp_path: Path) -> Path:
    out = tmp_path / "policies"
    (out / "shop").mkdir(parents=True)
    (out / "shop" / "cart.yaml").write_text(HAND)
    return out


def test_replay_never_changes_a_persons_policy_and_names_it(hand_folder: Path) -> None:
    for _ in range(2):
        ran = cpg("replay", str(EXAMPLE), "-d", str(hand_folder), "--no-evidence", "-o", "json")
        assert ran.returncode == 0, ran.stderr
        assert (hand_folder / "shop" / "cart.yaml").read_text() == HAND
    files = {
        f["path"].rsplit("/", 2)[-2] + "/" + f["path"].rsplit("/", 1)[-1]: f
        for f in json.loads(ran.stdout)["policies"]
    }
    mine = files["shop/cart-cpg.yaml"]
    assert mine["beside"] == "CiliumNetworkPolicy cart-hand in shop/cart.yaml"
    assert mine["outcome"] == "unchanged"
    written = yaml.safe_load((hand_folder / "shop" / "cart-cpg.yaml").read_text())
    assert written["metadata"]["name"] == "cpg-cart"
    assert written["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "cpg"
    text = cpg("replay", str(EXAMPLE), "-d", str(hand_folder), "--no-evidence").stdout
    assert "shop/cart-cpg.yaml: also selected by your policy CiliumNetworkPolicy cart-hand" in text
    planned = cpg("plan", str(EXAMPLE), "-d", str(hand_folder), "-o", "json")
    assert {"policy": "shop/cpg-cart", "by": ["shop/cart-hand"]} in json.loads(planned.stdout)[
        "also_selected"
    ]
    plan_text = cpg("plan", str(EXAMPLE), "-d", str(hand_folder)).stdout
    assert "shop/cpg-cart: also selected by your policy shop/cart-hand" in plan_text
    markdown = cpg("report", "-d", str(hand_folder)).stdout
    assert "Also selected by your policy `shop/cart-hand`" in markdown
    html = cpg("report", "-d", str(hand_folder), "-o", "html").stdout
    assert html.count('"yours": true') == 1 and "Your policy (cpg did not write it" in html


def test_a_persons_policy_named_as_cpg_would_name_it_keeps_its_name(tmp_path: Path) -> None:
    out = tmp_path / "p"
    (out / "shop").mkdir(parents=True)
    (out / "shop" / "cart.yaml").write_text(HAND.replace("cart-hand", "cpg-cart"))
    assert cpg("replay", str(EXAMPLE), "-d", str(out), "--no-evidence").returncode == 0
    written = yaml.safe_load((out / "shop" / "cart-cpg.yaml").read_text())
    assert written["metadata"]["name"] == "cpg-cart-cpg", "never two policies of one name"


def test_plan_write_fixes_never_changes_a_persons_policy(tmp_path: Path) -> None:
    """--write-fixes adds allow rules to the proposal: beside a person's policy, never in it."""
    frontend, cart = endpoint("shop", "frontend"), endpoint("shop", "cart")
    capture = tmp_path / "c.jsonl"
    capture.write_text(
        jsonl([flow_dict(src=frontend, dst=cart, tcp=9000, verdict="FORWARDED", reason=None)])
    )
    out = tmp_path / "p"
    (out / "shop").mkdir(parents=True)
    strict = HAND.replace('port: "8080"', 'port: "8080"').replace("cart-hand", "cart-hand")
    (out / "shop" / "cart.yaml").write_text(strict)
    planned = cpg("plan", str(capture), "-d", str(out), "--write-fixes")
    assert planned.returncode in (0, 3), planned.stderr
    assert (out / "shop" / "cart.yaml").read_text() == strict
    fixed = yaml.safe_load((out / "shop" / "cart-cpg.yaml").read_text())
    assert fixed["spec"]["ingress"][0]["toPorts"][0]["ports"] == [
        {"port": "9000", "protocol": "TCP"}
    ]
    assert cpg("plan", str(capture), "-d", str(out)).returncode == 0


def test_propose_keeps_a_persons_policy_in_the_repository(tmp_path: Path) -> None:
    from cpg_io.runs._propose import _copy_policies

    source, target = tmp_path / "run", tmp_path / "repo"
    cpg("replay", str(EXAMPLE), "-d", str(source), "--no-evidence")
    (target / "shop").mkdir(parents=True)
    (target / "shop" / "cart.yaml").write_text(HAND)
    files = {f.path: f for f in _copy_policies(source, target, target)}
    assert files["shop/cart.yaml"].status == "kept"
    assert "your policy (CiliumNetworkPolicy cart-hand)" in files["shop/cart.yaml"].note
    assert (target / "shop" / "cart.yaml").read_text() == HAND
    shutil.rmtree(source)


def test_generate_never_changes_a_persons_policy(hand_folder: Path) -> None:
    from fake_relay import example_responses, fake_relay

    with fake_relay(example_responses()) as (_relay, address):
        ran = cpg(
            "generate",
            "--server",
            address,
            "-d",
            str(hand_folder),
            "--duration",
            "2s",
            "--flush-interval",
            "0.3s",
            "--no-evidence",
        )
    assert ran.returncode == 0, ran.stderr
    assert (hand_folder / "shop" / "cart.yaml").read_text() == HAND
    assert "also selected by your policy: CiliumNetworkPolicy cart-hand" in ran.stdout
    written = yaml.safe_load((hand_folder / "shop" / "cart-cpg.yaml").read_text())
    assert written["spec"]["ingress"] and written["spec"]["egress"]


def test_plan_and_lint_say_what_the_capture_shaped_folder_takes_away(
    synthetic: Path, tmp_path: Path
) -> None:
    """The folder as cpg wrote it before (exactly the capture's peers, UDP/53 only, no DNS
    added, system namespaces included): plan and lint name each availability problem, and
    the folder cpg writes now has none."""
    capture = synthetic_capture(tmp_path / "c.jsonl", 45)
    shaped = tmp_path / "shaped"
    ran = cpg(
        "replay",
        str(capture),
        "-d",
        str(shaped),
        "--no-evidence",
        "--exact-peers",
        "*",
        "--no-dns-rule",
        "--include-system-namespaces",
    )
    assert ran.returncode == 0, ran.stderr
    planned = cpg("plan", str(capture), "-d", str(shaped), "-o", "json")
    assert planned.returncode == 3
    found = json.loads(planned.stdout)["availability"]
    messages = [f"{a['code']} {a['policy']} {a['message']}" for a in found]
    assert any(m.startswith("CPG040 app-01/cpg-api ") and "TCP/53" in m for m in messages)
    assert any(
        m.startswith("CPG041 kube-system/cpg-kube-dns ") and "serves DNS" in m for m in messages
    )
    assert any(m.startswith("CPG041 monitoring/cpg-prometheus ") for m in messages)
    assert any(m.startswith("CPG041 ingress-nginx/cpg-controller ") for m in messages)
    assert "CPG041  a new workload in a new namespace could not resolve DNS" in messages
    text = cpg("plan", str(capture), "-d", str(shaped))
    assert "AVAILABILITY:" in text.stdout and "see AVAILABILITY" in text.stderr
    linted = cpg("lint", str(shaped))
    assert linted.returncode == 3
    for code in ("CPG040", "CPG041"):
        assert code in linted.stdout
    # what cpg writes now: nothing to say
    now = tmp_path / "now"
    cpg("replay", str(capture), "-d", str(now), "--no-evidence")
    assert (
        json.loads(cpg("plan", str(capture), "-d", str(now), "-o", "json").stdout)["availability"]
        == []
    )
    assert cpg("lint", str(now)).returncode == 0
