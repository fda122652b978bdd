"""cpg plan (issue 15): what applying the policies would change, before anyone applies them."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml

from captures import PROMETHEUS, WEB, api, ingress_capture
from conftest import cpg, endpoint, flow_dict, jsonl

# A policy applied today: it polices api v1 (ingress) and nothing else.
V1_LOCKDOWN = {
    "apiVersion": "cilium.io/v2",
    "kind": "CiliumNetworkPolicy",
    "metadata": {"name": "api-v1-lockdown", "namespace": "shop"},
    "spec": {
        "endpointSelector": {"matchLabels": {"app": "api", "version": "v1"}},
        "ingress": [{"fromEndpoints": [{"matchLabels": {"app": "gateway"}}]}],
    },
}


def run_plan(*args: str) -> tuple[int, dict[str, Any], str]:
    ran = cpg("plan", *args, "-o", "json")
    text = cpg("plan", *args)
    assert ran.returncode == text.returncode, (ran.stderr, text.stderr)
    return ran.returncode, json.loads(ran.stdout) if ran.stdout else {}, text.stdout


def test_a_selector_that_reaches_unpoliced_pods_would_break_their_traffic(tmp_path: Path) -> None:
    capture = ingress_capture(tmp_path / "all.jsonl", allowed_by=True)
    out = tmp_path / "policies"
    replayed = cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(tmp_path / "e"))
    assert replayed.returncode == 0, replayed.stderr
    api_policy = out / "shop" / "api.yaml"
    assert yaml.safe_load(api_policy.read_text())["spec"]["endpointSelector"] == {
        "matchLabels": {"app": "api"}
    }
    code, plan, text = run_plan(str(capture), "-d", str(out), "--evidence-dir", str(tmp_path / "e"))
    assert code == 3
    (broken,) = plan["would_break"]
    assert broken["traffic"]["source"] == "monitoring/prometheus"
    assert broken["traffic"]["port"] == 9090 and broken["traffic"]["flows"] == 12
    assert broken["policy"] == "shop/cpg-api" and broken["selector"] == {"app": "api"}
    # the first fix leaves the v2 pod out, as it is today; the rule is the alternative
    assert "narrow shop/cpg-api: add version NotIn (v2)" in broken["fix"]
    assert "or add a rule to shop/cpg-api" in broken["fix"]
    (newly,) = plan["newly_enforced"]
    assert newly["labels"] == {"app": "api", "version": "v2"} and newly["direction"] == "ingress"
    assert newly["pods"] == ["api-v2-a"] and newly["forwarded_flows"] == 12
    assert plan["fixed"] == plan["candidates"] == 2
    assert text.index("WOULD BREAK") < text.index("Fixes:")  # would-break first
    assert "monitoring/prometheus → shop/api TCP/9090 (12 flows)" in text
    assert "shop/cpg-api: fixes 2 flows, would break 12, newly enforces 1 endpoint(s)" in text
    # the confidence of the new rule comes from the evidence
    (rule,) = [c for c in plan["confidence"] if c["policy"] == "shop/cpg-api"]
    assert rule["flows"] == 2 and rule["destinations"] == 2 and rule["sessions"] == 1
    # narrowing the selector by hand, as suggested, makes the plan pass
    narrowed = api_policy.read_text().replace(
        "  endpointSelector:\n    matchLabels:\n      app: api\n",
        "  endpointSelector:\n    matchLabels:\n      app: api\n      version: v1\n",
    )
    api_policy.write_text(narrowed)
    code, plan, text = run_plan(str(capture), "-d", str(out))
    assert code == 0, text
    assert plan["would_break"] == [] and plan["newly_enforced"] == []
    assert plan["fixed"] == 2
    assert "Nothing that works today would break (" in text


def test_the_same_on_the_egress_side(tmp_path: Path) -> None:
    def worker(version: str) -> dict[str, Any]:
        return endpoint("jobs", "worker", f"k8s:version={version}", pod_name=f"worker-{version}")

    db = endpoint("data", "db", pod_name="db-0")
    metrics = endpoint("monitoring", "pushgateway", pod_name="pg-0")
    capture = tmp_path / "egress.jsonl"
    capture.write_text(
        jsonl(
            [
                flow_dict(worker("v1"), db, direction="EGRESS", tcp=5432),
                *[
                    flow_dict(
                        worker("v2"),
                        metrics,
                        direction="EGRESS",
                        tcp=9091,
                        verdict="FORWARDED",
                        reason=None,
                    )
                    for _ in range(3)
                ],
            ]
        )
    )
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    code, plan, _ = run_plan(str(capture), "-d", str(out))
    assert code == 3
    (broken,) = plan["would_break"]
    assert broken["traffic"]["direction"] == "egress"
    assert broken["traffic"]["destination"] == "monitoring/pushgateway"
    assert "add version NotIn (v2)" in broken["fix"]
    (newly,) = plan["newly_enforced"]
    assert newly["direction"] == "egress" and newly["labels"]["version"] == "v2"


def test_current_from_yaml_the_cluster_and_the_flows_agree(tmp_path: Path) -> None:
    from fake_kube import fake_kube

    inferred_capture = ingress_capture(tmp_path / "with-allowed-by.jsonl", allowed_by=True)
    out = tmp_path / "policies"
    assert cpg("replay", str(inferred_capture), "-d", str(out), "--no-evidence").returncode == 0
    listed = tmp_path / "current.yaml"  # as kubectl get cnp,ccnp -A -o yaml writes it
    listed.write_text(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [V1_LOCKDOWN]}))

    def essentials(plan: dict[str, Any]) -> tuple[Any, ...]:
        return (plan["would_break"], plan["newly_enforced"], plan["fixed"], plan["candidates"])

    code, from_yaml, _ = run_plan(str(inferred_capture), "-d", str(out), "--current", str(listed))
    assert code == 3 and from_yaml["current_source"] == "current"
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.policies = [V1_LOCKDOWN]
        code_cluster, from_cluster, _ = run_plan(
            str(inferred_capture), "-d", str(out), "--cluster", "--kubeconfig", str(kubeconfig)
        )
        assert all(method == "GET" for method, _ in kube.requests), "read-only"
    code_flows, from_flows, text = run_plan(str(inferred_capture), "-d", str(out))
    assert code_cluster == code_flows == 3
    assert essentials(from_yaml) == essentials(from_cluster) == essentials(from_flows)
    assert from_flows["current_source"] == "flows" and "allowed_by" in from_flows["blind_spots"]
    assert "inferred from the flows" in text
    both = cpg("plan", str(inferred_capture), "--current", str(listed), "--cluster")
    assert both.returncode == 2


def _policy(name: str, ingress: list[Any] | None = None, egress: list[Any] | None = None) -> Any:
    spec: dict[str, Any] = {"endpointSelector": {"matchLabels": {"app": "api"}}}
    if ingress is not None:
        spec["ingress"] = ingress
    if egress is not None:
        spec["egress"] = egress
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": name, "namespace": "shop"},
        "spec": spec,
    }


def _ports(*ports: str, http: list[Any] | None = None) -> list[Any]:
    entry: dict[str, Any] = {"ports": [{"port": p, "protocol": "TCP"} for p in ports]}
    if http:
        entry["rules"] = {"http": http}
    return [entry]


def test_the_semantic_diff_speaks_cilium() -> None:
    from cpg_core._review.plan import plan

    web = {"fromEndpoints": [{"matchLabels": {"app": "web"}}]}
    current = [
        _policy("cpg-api", ingress=[{**web, "toPorts": _ports("8080", "8443")}]),
        _policy("cpg-same", ingress=[{**web, "toPorts": _ports("80")}]),
    ]
    proposal = [
        _policy(
            "cpg-api",
            ingress=[
                {**web, "toPorts": _ports("8080", http=[{"method": "GET", "path": "/api"}])},
                {"fromEndpoints": [{"matchLabels": {"app": "admin"}}], "toPorts": _ports("9000")},
            ],
            egress=[{"toFQDNs": [{"matchName": "api.example.com"}], "toPorts": _ports("443")}],
        ),
        _policy("cpg-same", ingress=[{**web, "toPorts": _ports("80")}]),
        _policy("cpg-new", ingress=[{**web, "toPorts": _ports("80")}]),
    ]
    diffs = {d.policy: d for d in plan([], proposal, current).diffs}
    api = diffs["shop/cpg-api"]
    assert api.status == "changed"
    assert set(api.added) == {
        "ingress from endpoints app=web TCP/8080 HTTP GET /api",  # L7 rule added
        "ingress from endpoints app=admin TCP/9000",  # peer added
        "egress to fqdn api.example.com TCP/443",  # FQDN added
    }
    assert set(api.removed) == {
        "ingress from endpoints app=web TCP/8443",  # port removed
        "ingress from endpoints app=web TCP/8080",  # now only GET /api on it
    }
    assert diffs["shop/cpg-same"].status == "unchanged"
    assert diffs["shop/cpg-new"].status == "new"
    assert diffs["shop/cpg-new"].added == ("ingress from endpoints app=web TCP/80",)


def test_min_flows_holds_back_rare_rules_and_says_so(tmp_path: Path) -> None:
    capture = tmp_path / "c.jsonl"
    capture.write_text(
        jsonl(
            [flow_dict(WEB, api("v1", "api-v1-a"), tcp=8080) for _ in range(3)]
            + [flow_dict(PROMETHEUS, api("v1", "api-v1-a"), tcp=9090)]
        )
    )
    out = tmp_path / "policies"
    ran = cpg("replay", str(capture), "-d", str(out), "--no-evidence", "--min-flows", "2")
    assert ran.returncode == 0, ran.stderr
    text = (out / "shop" / "api.yaml").read_text()
    assert '"8080"' in text and '"9090"' not in text
    assert "Held back (seen fewer than --min-flows 2 times; not written): 1" in ran.stdout
    assert "shop/api: TCP/9090 from monitoring/app=prometheus (1 flow)" in ran.stdout
    as_json = cpg(
        "replay",
        str(capture),
        "-d",
        str(tmp_path / "j"),
        "--no-evidence",
        "--min-flows",
        "2",
        "-o",
        "json",
    )
    assert json.loads(as_json.stdout)["held_back"] == [
        {
            "namespace": "shop",
            "workload": "api",
            "rule": "TCP/9090 from monitoring/app=prometheus",
            "flows": 1,
        }
    ]
    # a policy whose every entry is rare is not written at all
    alone = cpg(
        "replay", str(capture), "-d", str(tmp_path / "k"), "--no-evidence", "--min-flows", "5"
    )
    assert not (tmp_path / "k" / "shop" / "api.yaml").exists()
    assert "Held back" in alone.stdout


def test_held_back_entries_join_once_they_reach_min_flows() -> None:
    """generate's flushes: an entry held back at one flush is written, with every flow, when
    a later flush brings it to --min-flows."""
    from conftest import flow_dict as fd
    from cpg_core._flows.parse import FlowParser
    from cpg_core._synthesis.aggregate import Aggregator, hold_back

    parser = FlowParser()

    def interval(count: int) -> Any:
        agg = Aggregator()
        for _ in range(count):
            agg.add(parser.parse(fd(WEB, api("v1", "api-v1-a"), tcp=8080)))
        return agg.plans()

    first, held = hold_back(interval(1), 3)
    assert first == [] and len(held) == 1
    second, held = hold_back(interval(1), 3, held)
    assert second == [] and len(held) == 1
    third, held = hold_back(interval(1), 3, held)
    assert held == {}
    ((atom, stats),) = third[0].attribution.items()
    assert stats.count == 3 and atom.port == 8080


def test_a_drops_only_capture_cannot_say_nothing_would_break(tmp_path: Path) -> None:
    """No forwarded traffic to check: 'cannot judge', exit 4 (never a green 0)."""
    capture = tmp_path / "drops-only.jsonl"
    capture.write_text(jsonl([flow_dict(), flow_dict(tcp=9090)]))
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    code, data, text = run_plan(str(capture), "-d", str(out))
    assert code == 4
    assert data["verdict"] == "cannot_judge" and data["forwarded_flows"] == 0
    assert "Cannot judge" in text and "Nothing would break" not in text
    stderr = cpg("plan", str(capture), "-d", str(out)).stderr
    assert "cannot judge what would break" in stderr and "every verdict" in stderr


def test_an_empty_or_missing_current_folder_is_said(tmp_path: Path) -> None:
    capture = ingress_capture(tmp_path / "all.jsonl", allowed_by=True)
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    empty = tmp_path / "today"
    empty.mkdir()
    (empty / "notes.yaml").write_text("kind: ConfigMap\n")
    warned = cpg("plan", str(capture), "-d", str(out), "--current", str(empty))
    assert f"{empty}: no CiliumNetworkPolicy in it" in warned.stderr
    missing = cpg("plan", str(capture), "-d", str(out), "--current", str(tmp_path / "nope"))
    assert missing.returncode == 1
    assert "check --current" in missing.stderr and "--output-dir" not in missing.stderr


def test_the_new_user_case_breaks_prometheus_not_the_kubelet_and_names_version(
    tmp_path: Path,
) -> None:
    from captures import new_user_capture

    capture = new_user_capture(tmp_path / "all.jsonl")
    out = tmp_path / "policies"
    replayed = cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(tmp_path / "e"))
    assert replayed.returncode == 0, replayed.stderr
    policy = yaml.safe_load((out / "bookinfo" / "reviews.yaml").read_text())
    assert policy["spec"]["endpointSelector"] == {"matchLabels": {"app": "reviews"}}
    code, plan, text = run_plan(str(capture), "-d", str(out), "--evidence-dir", str(tmp_path / "e"))
    assert code == 3
    (broken,) = plan["would_break"]  # the node's probes are admitted by allow-localhost
    assert broken["traffic"]["source"] == "monitoring/prometheus"
    assert plan["node_flows"] == 6 and "allow-localhost: always" in plan["notes"][0]
    assert "narrow bookinfo/cpg-reviews: add version NotIn (v1)" in broken["fix"]
    assert "sidecar.opentelemetry.io" not in broken["fix"]
    assert broken["narrow_yaml"].startswith("# bookinfo/cpg-reviews\n")
    narrowed = yaml.safe_load(broken["narrow_yaml"])
    assert narrowed == {
        "endpointSelector": {
            "matchLabels": {"app": "reviews"},
            "matchExpressions": [{"key": "version", "operator": "NotIn", "values": ["v1"]}],
        }
    }
    (rule,) = yaml.safe_load(broken["rule_yaml"])["ingress"]
    assert rule["fromEndpoints"] == [
        {"matchLabels": {"app": "prometheus", "io.kubernetes.pod.namespace": "monitoring"}}
    ]
    assert rule["toPorts"] == [{"ports": [{"port": "9090", "protocol": "TCP"}]}]
    assert "- key: version" in text and "or add to bookinfo/cpg-reviews:" in text
    assert "6 forwarded flows from pods' own nodes" in text
    # agents that police the node's traffic: the probes would break too
    code, plan, _ = run_plan(
        str(capture),
        "-d",
        str(out),
        "--evidence-dir",
        str(tmp_path / "e"),
        "--allow-localhost",
        "policy",
    )
    assert code == 3 and plan["node_flows"] == 0
    sources = sorted(b["traffic"]["source"] for b in plan["would_break"])
    assert sources == ["host", "monitoring/prometheus"], sources
    bad = cpg("plan", str(capture), "-d", str(out), "--allow-localhost", "sometimes")
    assert bad.returncode == 2 and "--allow-localhost" in bad.stderr


def test_write_fixes_adds_the_would_break_rules_and_marks_their_evidence(tmp_path: Path) -> None:
    from captures import new_user_capture

    capture = new_user_capture(tmp_path / "all.jsonl")
    out, evidence = tmp_path / "policies", tmp_path / "e"
    assert (
        cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence)).returncode == 0
    )
    breaking = cpg("plan", str(capture), "-d", str(out), "--evidence-dir", str(evidence))
    assert breaking.returncode == 3 and "rule_yaml" not in breaking.stdout
    assert "cpg: --write-fixes applies each first fix to the proposed policies" in breaking.stderr
    fixed = cpg(
        "plan", str(capture), "-d", str(out), "--evidence-dir", str(evidence), "--write-fixes"
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    # the first fix: the v1 pods stay unpoliced, as today; no rule is opened
    assert "--write-fixes: narrowed 1 selector(s) and added 0 rule(s)" in fixed.stderr
    assert "Nothing that works today would break" in fixed.stdout
    policy = yaml.safe_load((out / "bookinfo" / "reviews.yaml").read_text())
    assert policy["spec"]["endpointSelector"]["matchExpressions"] == [
        {"key": "version", "operator": "NotIn", "values": ["v1"]}
    ]
    peers = [r["fromEndpoints"][0]["matchLabels"]["app"] for r in policy["spec"]["ingress"]]
    assert peers == ["productpage"]
    again = cpg(
        "plan", str(capture), "-d", str(out), "--evidence-dir", str(evidence), "--write-fixes"
    )
    assert again.returncode == 0 and "--write-fixes" not in again.stderr  # nothing left to do


def test_write_fixes_adds_a_rule_where_no_label_tells_the_pods_apart(tmp_path: Path) -> None:
    """Two pods of one workload with the same labels: one dropped its DNS (policed), the
    other's scrape works today (not policed): no selector can tell them apart, so the fix
    is the rule, with evidence of class plan."""
    api_a = endpoint("shop", "api", pod_name="api-a")
    api_b = endpoint("shop", "api", pod_name="api-b")
    prometheus = endpoint("monitoring", "prometheus", pod_name="prom-0")
    web = endpoint("shop", "web", pod_name="web-0")
    capture = tmp_path / "c.jsonl"
    scrape = {"verdict": "FORWARDED", "reason": None}
    capture.write_text(
        jsonl(
            [flow_dict(web, api_a, tcp=8080)]
            + [flow_dict(prometheus, api_b, tcp=9090, **scrape) for _ in range(4)]
        )
    )
    out, evidence = tmp_path / "policies", tmp_path / "e"
    assert (
        cpg("replay", str(capture), "-d", str(out), "--evidence-dir", str(evidence)).returncode == 0
    )
    fixed = cpg(
        "plan", str(capture), "-d", str(out), "--evidence-dir", str(evidence), "--write-fixes"
    )
    assert fixed.returncode == 0, fixed.stdout + fixed.stderr
    assert "--write-fixes: added 1 rule(s)" in fixed.stderr
    policy = yaml.safe_load((out / "shop" / "api.yaml").read_text())
    peers = [r["fromEndpoints"][0]["matchLabels"]["app"] for r in policy["spec"]["ingress"]]
    assert peers == ["prometheus", "web"]
    (doc,) = [json.loads(p.read_text()) for p in evidence.rglob("api.json")]
    assert [s["source"]["type"] for s in doc["sessions"]] == ["replay", "plan"]
    classes = {r["key"]: r["classes"] for r in doc["rules"]}
    assert classes["ingress:ep:monitoring/app=prometheus:TCP:9090"] == {"plan": 4}


def test_a_namespace_default_deny_breaks_the_traffic_that_works_there(tmp_path: Path) -> None:
    """cpg bootstrap's default-deny (``ingress: [{}]``, ``egress: [{}]``) selects no peer, so
    the plan lists the namespace's forwarded traffic as would-break: the example's
    frontend → cart flows, seen at cart's ingress, are judged at frontend's egress too (a
    packet that arrived left its source), which the default-deny newly polices."""
    from conftest import EXAMPLE

    folder = tmp_path / "dd"
    folder.mkdir()
    boot = cpg("bootstrap", "-n", "shop")
    assert boot.returncode == 0, boot.stderr
    (folder / "default-deny.yaml").write_text(boot.stdout)
    code, plan, text = run_plan(str(EXAMPLE), "-d", str(folder))
    assert code == 3 and plan["verdict"] == "breaks"
    (broken,) = plan["would_break"]
    assert broken["traffic"]["direction"] == "egress"
    assert (broken["traffic"]["source"], broken["traffic"]["destination"]) == (
        "shop/frontend",
        "shop/cart",
    )
    # the default-deny selects every pod of shop: its rule would let them all through
    assert broken["traffic"]["flows"] == 6 and broken["policy"] == "shop/cpg-frontend"
    assert "a new policy of shop/frontend's own" in broken["fix"]
    assert plan["forwarded_flows"] == 7  # what the capture shows, each flow once
    assert "egress nothing (an empty rule selects no peer: default-deny)" in text
    assert "any peer any port" not in text


def test_a_fix_whose_source_the_proposal_locks_down_does_not_take(tmp_path: Path) -> None:
    """A drop at cart's ingress that the proposal admits there, while the same proposal puts
    frontend's egress into default-deny with no rule for cart: not fixed."""
    capture = tmp_path / "drops.jsonl"
    capture.write_text(jsonl([flow_dict(), flow_dict(verdict="FORWARDED", reason=None, tcp=9000)]))
    folder = tmp_path / "p"
    folder.mkdir()
    cart_in = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "cart", "namespace": "shop"},
        "spec": {
            "endpointSelector": {"matchLabels": {"app": "cart"}},
            "ingress": [{"fromEndpoints": [{"matchLabels": {"app": "frontend"}}]}],
        },
    }
    front_out = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "frontend", "namespace": "shop"},
        "spec": {
            "endpointSelector": {"matchLabels": {"app": "frontend"}},
            "egress": [{"toEntities": ["world"]}],
        },
    }
    (folder / "cart.yaml").write_text(yaml.safe_dump(cart_in))
    (folder / "frontend.yaml").write_text(yaml.safe_dump(front_out))
    code, plan, _ = run_plan(str(capture), "-d", str(folder))
    assert plan["candidates"] == 1 and plan["fixed"] == 0
    (broken,) = plan["would_break"]  # the forwarded flow, at frontend's egress
    assert broken["traffic"]["port"] == 9000 and broken["policy"] == "shop/frontend"
    front_out["spec"]["egress"].append({"toEndpoints": [{"matchLabels": {"app": "cart"}}]})
    (folder / "frontend.yaml").write_text(yaml.safe_dump(front_out))
    code, plan, _ = run_plan(str(capture), "-d", str(folder))
    # frontend resolves nothing: not in the capture, but the plan says so (§D47)
    assert code == 3 and plan["fixed"] == 1 and plan["would_break"] == []
    assert [a["code"] for a in plan["availability"]] == ["CPG040"]
    front_out["spec"]["egress"].append(
        {
            "toEndpoints": [
                {
                    "matchLabels": {
                        "k8s-app": "kube-dns",
                        "io.kubernetes.pod.namespace": "kube-system",
                    }
                }
            ],
            "toPorts": [{"ports": [{"port": "53", "protocol": p} for p in ("UDP", "TCP")]}],
        }
    )
    (folder / "frontend.yaml").write_text(yaml.safe_dump(front_out))
    code, plan, _ = run_plan(str(capture), "-d", str(folder))
    assert code == 0 and plan["availability"] == []


def test_a_report_of_a_plan_that_cannot_judge_says_so(tmp_path: Path) -> None:
    """``cpg report --plan`` of a cannot_judge plan said "0 flows would break", as if the
    plan had checked everything; both reports now say it could not judge, and why."""
    capture = tmp_path / "drops-only.jsonl"
    capture.write_text(jsonl([flow_dict(), flow_dict(tcp=9090)]))
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    planned = cpg("plan", str(capture), "-d", str(out), "-o", "json")
    assert planned.returncode == 4
    (tmp_path / "plan.json").write_text(planned.stdout)
    markdown = cpg("report", "-d", str(out), "--plan", str(tmp_path / "plan.json")).stdout
    assert "cannot judge what would break" in markdown
    assert "flows would break" not in markdown and "every verdict" in markdown
    html = cpg("report", "-d", str(out), "--plan", str(tmp_path / "plan.json"), "-o", "html")
    assert 'id="cannot-judge"' in html.stdout and "0 flows would break" not in html.stdout


def test_a_pod_hubble_called_world_gets_no_cidr_fix(tmp_path: Path) -> None:
    """replay rightly writes no toCIDR for a pod Hubble reported as world (a CIDR rule never
    selects a pod Cilium manages), but plan's fix for the same flow was a toCIDR /32: the fix
    says the identity is unknown instead, with no rule to paste."""
    from conftest import WORLD

    pod_as_world = {**WORLD, "pod_name": "db-0", "namespace": "shop"}
    capture = tmp_path / "all.jsonl"
    capture.write_text(
        jsonl(
            [
                # frontend → cart works today: learning writes frontend's egress rule
                flow_dict(direction="EGRESS", verdict="FORWARDED", reason=None, tcp=443),
                flow_dict(
                    dst=pod_as_world,
                    dst_ip="10.0.0.9",
                    direction="EGRESS",
                    verdict="FORWARDED",
                    reason=None,
                    tcp=5432,
                ),
            ]
        )
    )
    out = tmp_path / "policies"
    learned = cpg("replay", str(capture), "-d", str(out), "--no-evidence", "--learn", "forwarded")
    assert learned.returncode == 0, learned.stderr
    assert "10.0.0.9" not in (out / "shop" / "frontend.yaml").read_text()
    code, plan, text = run_plan(str(capture), "-d", str(out))
    assert code == 3
    (broken,) = plan["would_break"]
    assert broken["traffic"]["port"] == 5432
    assert broken["fix"].startswith("cannot judge: identity unknown")
    assert broken["rule_yaml"] == "" and "toCIDR:" not in text and "10.0.0.9/32" not in text


def test_a_policy_map_that_would_overflow_is_named_and_fails_the_plan(tmp_path: Path) -> None:
    web, api_pod = endpoint("shop", "web"), endpoint("shop", "api")
    records = [flow_dict(web, api_pod, tcp=8080)]
    records += [
        flow_dict(endpoint("shop", f"client-{i}"), api_pod, verdict="FORWARDED", reason=None)
        for i in range(10)
    ]
    capture = tmp_path / "all.jsonl"
    capture.write_text(jsonl(records))
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--no-evidence").returncode == 0
    policy = yaml.safe_load((out / "shop" / "api.yaml").read_text())
    policy["spec"]["ingress"].append(
        {
            "fromEntities": ["cluster"],
            "toPorts": [
                {"ports": [{"port": str(p), "protocol": "TCP"} for p in range(9000, 9010)]}
            ],
        }
    )
    (out / "shop" / "api.yaml").write_text(yaml.safe_dump(policy))
    plain = cpg("plan", str(capture), "-d", str(out))
    assert plain.returncode == 0 and "POLICY MAP" not in plain.stdout, plain.stdout
    tight = cpg("plan", str(capture), "-d", str(out), "--policy-map-max", "100")
    assert tight.returncode == 3, tight.stdout + tight.stderr
    assert "POLICY MAP: 1 pods over the 100-entry policy map" in tight.stdout
    # 12 identities (web, api, 10 clients) × 10 ports, plus web's own rule
    assert "shop/api: ~121 entries (121 %, OVER)" in tight.stdout
    assert "through an entity" in tight.stdout or "cluster" in tight.stdout
    assert "policy map would overflow" in tight.stderr
    data = json.loads(
        cpg("plan", str(capture), "-d", str(out), "--policy-map-max", "100", "-o", "json").stdout
    )
    (found,) = data["policy_map"]
    assert found["endpoint"] == "shop/api" and found["entries"] == 121
    assert data["policy_map_max"] == 100
    # the review report says it too
    (tmp_path / "plan.json").write_text(json.dumps(data))
    review = ["report", "-d", str(out)]
    markdown = cpg(*review, "--plan", str(tmp_path / "plan.json")).stdout
    assert "## Policy map pressure (cpg plan)" in markdown
    assert "| shop/api | 121 | 121 % (over) |" in markdown
    html = cpg(*review, "--plan", str(tmp_path / "plan.json"), "-o", "html").stdout
    assert 'id="policy-map"' in html and "shop/api" in html
    summary = json.loads(cpg(*review, "--plan", str(tmp_path / "plan.json"), "-o", "json").stdout)
    assert summary["policy_map"][0]["entries"] == 121
    bad = cpg("plan", str(capture), "-d", str(out), "--policy-map-max", "0")
    assert bad.returncode == 2 and "--policy-map-max" in bad.stderr


def test_replay_verify_and_plan_count_the_same_candidates(tmp_path: Path) -> None:
    """Replay said 34 candidates, verify checked 29 of 34, plan "29/33 denied flows
    admitted" (it left out the flow Hubble gave no direction) and said nothing breaks twice."""
    from conftest import EXAMPLE

    out = tmp_path / "p"
    replayed = json.loads(cpg("replay", str(EXAMPLE), "-d", str(out), "-o", "json").stdout)
    candidates = replayed["flows"]["candidate"]
    checked = json.loads(cpg("verify", str(EXAMPLE), "-d", str(out), "-o", "json").stdout)
    planned = cpg("plan", str(EXAMPLE), "-d", str(out))
    plan = json.loads(cpg("plan", str(EXAMPLE), "-d", str(out), "-o", "json").stdout)
    assert candidates == 34 == plan["candidates"]
    assert checked["candidates"]["total"] + checked["unexpressible"] == candidates  # 29 + 5
    assert f"Fixes: 29/{candidates} candidate flows admitted" in planned.stdout
    assert planned.stdout.count("Nothing") == 1  # the verdict, said once
    assert (
        "Nothing that works today would break (7 forwarded flows checked, over 7 m 21 s of capture;"
        in planned.stdout
    )
    unknown = [t for t in plan["not_fixed"] if t["direction"] == "?"]
    assert [(t["source"], t["destination"], t["port"]) for t in unknown] == [
        ("shop/frontend", "shop/cart", 8080)
    ]
