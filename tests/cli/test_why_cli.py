"""cpg why / cpg trace: which policy decided a flow and what would admit it (issue 26)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import cpg, endpoint, flow_dict, jsonl

CLUSTER = "k8s:io.cilium.k8s.policy.cluster="
API = endpoint("shop", "api", f"{CLUSTER}east", pod_name="api-1", cluster_name="east")

POLICY = {
    "apiVersion": "cilium.io/v2",
    "kind": "CiliumNetworkPolicy",
    "metadata": {"name": "api-ingress", "namespace": "shop"},
    "spec": {
        "endpointSelector": {"matchLabels": {"app": "api"}},
        "ingress": [
            {
                "fromEndpoints": [{"matchLabels": {"app": "web"}}],
                "toPorts": [{"ports": [{"port": "8080", "protocol": "TCP"}]}],
            },
            {
                "fromEndpoints": [{"matchLabels": {"app": "gateway"}}],
                "toPorts": [
                    {
                        "ports": [{"port": "8080", "protocol": "TCP"}],
                        "rules": {"http": [{"method": "GET", "path": "^/v1/.*$"}]},
                    }
                ],
            },
        ],
        "ingressDeny": [{"fromEndpoints": [{"matchLabels": {"app": "intruder"}}]}],
    },
}


def client(app: str, ns: str = "shop", cluster: str = "east") -> dict[str, Any]:
    return endpoint(ns, app, f"{CLUSTER}{cluster}", pod_name=f"{app}-1", cluster_name=cluster)


CASES = {
    "a-label": flow_dict(client("web-v2"), API, tcp=8080),
    "b-port": flow_dict(client("web"), API, tcp=9090),
    "c-namespace": flow_dict(client("web", ns="other"), API, tcp=8080),
    "d-cluster": flow_dict(client("web", cluster="west"), API, tcp=8080),
    "e-deny": flow_dict(client("intruder"), API, tcp=8080, reason="POLICY_DENY"),
    "f-l7": flow_dict(
        client("gateway"),
        API,
        tcp=8080,
        l7={"type": "REQUEST", "http": {"method": "GET", "url": "/v2/items"}},
    ),
    "g-infra": flow_dict(client("web"), API, tcp=8080, reason="CT_MAP_INSERTION_FAILED"),
    "h-auth": flow_dict(client("web"), API, tcp=8080, reason="AUTH_REQUIRED"),
    "i-lb-range": flow_dict(client("web"), API, tcp=8080, reason="DENIED_BY_LB_SRC_RANGE_CHECK"),
}
EXPECTED = {
    "a-label": ("ingress[0]", "app=web (the peer has app=web-v2)"),
    "b-port": ("ingress[0]", "port: TCP/9090 is not in TCP/8080"),
    "c-namespace": ("ingress[0]", "namespace shop (the peer is in other)"),
    "d-cluster": ("ingress[0]", "the local cluster east (the peer is in west"),
    "f-l7": ("ingress[1]", "L7: HTTP GET /v2/items does not match GET ^/v1/.*$"),
}


def policies(tmp_path: Path) -> Path:
    folder = tmp_path / "applied"
    folder.mkdir(exist_ok=True)
    (folder / "api.yaml").write_text(yaml.safe_dump(POLICY, sort_keys=False))
    return folder


def why(capture: Path, folder: Path, *args: str) -> tuple[int, dict[str, Any]]:
    ran = cpg("why", str(capture), "-d", str(folder), "-o", "json", *args)
    assert ran.returncode in (0, 3), ran.stderr
    return ran.returncode, json.loads(ran.stdout)


@pytest.mark.parametrize("case", sorted(CASES))
def test_each_denial_names_the_policy_the_rule_and_the_reason(tmp_path: Path, case: str) -> None:
    folder = policies(tmp_path)
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl([CASES[case]] * 2))
    code, answer = why(capture, folder)
    assert code == 3
    (one,) = answer["answers"]
    assert one["flows"] == 2
    if case in ("h-auth", "i-lb-range"):
        assert one["drop_class"] in ("auth_required", "lb_source_range")
        assert "which no allow rule fixes" in one["answer"] and one["admit_yaml"] == ""
        assert one["fix"] and one["policed_by"] == [] and one["near_misses"] == []
        return
    if case == "g-infra":
        assert one["drop_class"] == "infra" and one["drop_reason"] == "CT_MAP_INSERTION_FAILED"
        assert "no policy causes or fixes it" in one["answer"] and one["fix"].startswith("https://")
        assert one["admit_yaml"] == "" and one["near_misses"] == []
        return
    assert one["policed_by"] == ["shop/api-ingress"]
    if case == "e-deny":
        assert one["deny"] == [
            {
                "policy": "shop/api-ingress",
                "section": "ingressDeny",
                "index": 0,
                "misses": [],
                "distance": 0,
            }
        ]
        assert "a deny rule, which wins over any allow" in one["answer"]
        assert one["admit_yaml"] == ""
        return
    rule, reason = EXPECTED[case]
    nearest = one["near_misses"][0]
    assert f"{nearest['section']}[{nearest['index']}]" == rule
    assert any(reason in miss for miss in nearest["misses"]), nearest
    assert f"shop/api-ingress {rule}" in one["answer"]
    # the pasted YAML, once added, makes cpg verify admit the flow
    pasted = yaml.safe_load(one["admit_yaml"])["ingress"]
    policy = yaml.safe_load((folder / "api.yaml").read_text())
    policy["spec"]["ingress"] += pasted
    (folder / "api.yaml").write_text(yaml.safe_dump(policy, sort_keys=False))
    checked = cpg("verify", str(capture), "-d", str(folder), "-o", "json")
    assert json.loads(checked.stdout)["candidates"] == {"total": 2, "admitted": 2}, checked.stdout
    code, again = why(capture, folder)
    assert code == 0 and again["answers"][0]["allowed"] is True


def test_the_text_answer_and_the_filters(tmp_path: Path) -> None:
    folder = policies(tmp_path)
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl(list(CASES.values())))
    text = cpg("why", str(capture), "-d", str(folder)).stdout
    assert f"{len(CASES)} kind(s) of flow" in text
    assert "miss:    shop/api-ingress ingress[0]: port: TCP/9090 is not in TCP/8080" in text
    _, picked = why(capture, folder, "--from-label", "app=web-v2")
    assert [a["traffic"] for a in picked["answers"]] == ["ingress shop/web-v2 → shop/api TCP/8080"]
    _, by_port = why(capture, folder, "--port", "9090", "--protocol", "tcp")
    assert len(by_port["answers"]) == 1
    _, by_ns = why(capture, folder, "--from-namespace", "other", "--to-pod", "shop/api")
    assert len(by_ns["answers"]) == 1
    _, none = why(capture, folder, "--verdict", "FORWARDED")
    assert none["answers"] == []
    bad = cpg("why", str(capture), "-d", str(folder), "--verdict", "MAYBE")
    assert bad.returncode == 2 and "--verdict" in bad.stderr


def test_a_folder_policy_that_already_admits_says_apply_it(tmp_path: Path) -> None:
    applied = policies(tmp_path)
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl([CASES["b-port"]]))
    proposed = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(proposed), "--no-evidence").returncode == 0
    _, answer = why(capture, proposed, "--current", str(applied))
    (one,) = answer["answers"]
    assert one["allowed"] is False and one["admit_yaml"] == ""
    assert one["fix"].startswith("apply shop/cpg-api from ") and "no rule to write" in one["fix"]


def test_trace_answers_a_flow_nobody_captured(tmp_path: Path) -> None:
    folder = policies(tmp_path)
    ran = cpg(
        "trace", "--from", "shop/web", "--to", "shop/api", "--port", "8080", "-d", str(folder)
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    assert "admit it (allowed by shop/api-ingress ingress[0])" in ran.stdout
    denied = cpg(
        "trace",
        "--from",
        "shop/gateway",
        "--to",
        "shop/api",
        "--port",
        "8080/TCP",
        "--method",
        "POST",
        "--path",
        "/v1/x",
        "-d",
        str(folder),
        "-o",
        "json",
    )
    assert denied.returncode == 3
    egress, one = json.loads(denied.stdout)["answers"]  # the source's egress, then ingress
    assert egress["direction"] == "egress" and egress["allowed"] is True  # not policed
    assert one["verdict"] == "TRACED" and one["drop_class"] == "traced"
    assert "L7: HTTP POST /v1/x does not match GET ^/v1/.*$" in one["near_misses"][0]["misses"]
    world = cpg(
        "trace",
        "--from",
        "8.8.8.8",
        "--to",
        "shop/api",
        "--port",
        "443",
        "-d",
        str(folder),
        "-o",
        "json",
    )
    (one,) = json.loads(world.stdout)["answers"]
    assert one["allowed"] is False and one["direction"] == "ingress"
    assert "the peer is outside the cluster (world)" in one["near_misses"][0]["misses"][0]
    assert yaml.safe_load(one["admit_yaml"])["ingress"][0]["fromCIDR"] == ["8.8.8.8/32"]
    bad = cpg("trace", "--from", "web", "--to", "shop/api", "--port", "8080", "-d", str(folder))
    assert bad.returncode == 2 and "--from" in bad.stderr


def test_verify_and_plan_take_the_same_filters(tmp_path: Path) -> None:
    from conftest import EXAMPLE

    out = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(out), "--no-evidence").returncode == 0
    whole = json.loads(cpg("verify", str(EXAMPLE), "-d", str(out), "-o", "json").stdout)
    picked = json.loads(
        cpg(
            "verify",
            str(EXAMPLE),
            "-d",
            str(out),
            "-o",
            "json",
            "--to-namespace",
            "payments",
            "--protocol",
            "TCP",
        ).stdout
    )
    assert 0 < picked["candidates"]["total"] < whole["candidates"]["total"]
    assert all("→ payments/" in check["traffic"] for check in picked["checks"])
    plan = json.loads(
        cpg("plan", str(EXAMPLE), "-d", str(out), "-o", "json", "--verdict", "DROPPED").stdout
    )
    assert plan["forwarded_flows"] == 0 and plan["verdict"] == "cannot_judge"
    for command in ("verify", "plan", "why"):
        assert "--from-label" in cpg(command, "-h").stdout, command


def test_replay_takes_the_filters_and_counts_what_they_leave_out(tmp_path: Path) -> None:
    from conftest import EXAMPLE

    outputs = {}
    for jobs in ("1", "2"):
        out = tmp_path / f"j{jobs}"
        ran = cpg(
            "replay",
            str(EXAMPLE),
            "-d",
            str(out),
            "--no-evidence",
            "-o",
            "json",
            "-j",
            jobs,
            "--to-namespace",
            "shop",
        )
        assert ran.returncode == 0, ran.stderr
        report = json.loads(ran.stdout)
        outputs[jobs] = (
            report["flows"],
            sorted(str(p.relative_to(out)) for p in out.rglob("*.yaml")),
        )
    flows, files = outputs["1"]
    assert outputs["2"] == outputs["1"]
    assert flows["filtered"] > 0 and flows["candidate"] > 0
    everything = tmp_path / "all"
    assert cpg("replay", str(EXAMPLE), "-d", str(everything), "--no-evidence").returncode == 0
    unfiltered = sorted(str(p.relative_to(everything)) for p in everything.rglob("*.yaml"))
    # flows to shop: shop's ingress policies, and the egress policies of their sources
    assert set(files) < set(unfiltered) and not any(f.startswith("payments/") for f in files)
    assert "shop/cart.yaml" in files


def test_explain_takes_the_flow_filters_on_its_samples(tmp_path: Path) -> None:
    from conftest import EXAMPLE

    out, evidence = tmp_path / "policies", tmp_path / "ev"
    assert (
        cpg("replay", str(EXAMPLE), "-d", str(out), "--evidence-dir", str(evidence)).returncode == 0
    )

    def keys(*args: str) -> list[str]:
        ran = cpg(
            "explain", "shop/cart", "-d", str(out), "--evidence-dir", str(evidence), "--json", *args
        )
        assert ran.returncode == 0, ran.stderr
        return [rule["key"] for rule in json.loads(ran.stdout)["matched_rules"]]

    everything = keys()
    from_frontend = keys("--from-label", "app=frontend")
    assert from_frontend and set(from_frontend) < set(everything)
    assert all("app=frontend" in key for key in from_frontend)
    assert keys("--port", "8080") == [k for k in everything if k.endswith(":8080")]
    assert keys("--from-namespace", "nowhere") == []
    two = cpg("explain", "shop/cart", "-d", str(out), "--port", "1", "--port", "2")
    assert two.returncode == 2 and "one --port" in two.stderr


def test_trace_is_denied_through_an_empty_rule(tmp_path: Path) -> None:
    """``ingress: [{}]`` is Cilium's default-deny: trace says denied (exit 3), names the empty
    rule, and offers the rule that would admit the flow."""
    folder = tmp_path / "dd"
    folder.mkdir()
    (folder / "dd.yaml").write_text(cpg("bootstrap", "-n", "shop").stdout)
    args = ("--from", "shop/frontend", "--to", "shop/cart", "--port", "8080/TCP", "-d", str(folder))
    ran = cpg("trace", *args, "-o", "json")
    assert ran.returncode == 3, ran.stderr
    answers = json.loads(ran.stdout)["answers"]
    assert {a["direction"]: a["allowed"] for a in answers} == {"egress": False, "ingress": False}
    ingress = next(a for a in answers if a["direction"] == "ingress")
    assert ingress["policed_by"] == ["shop/default-deny-shop"]
    assert "an empty rule selects no peer" in ingress["near_misses"][0]["misses"][0]
    assert "app: frontend" in ingress["admit_yaml"]
    text = cpg("trace", *args)
    assert text.returncode == 3 and "DENIED" in text.stdout


def test_one_header_is_one_kind_of_flow(tmp_path: Path) -> None:
    """Flows of several pods of one workload that get the same answer are one kind (they
    were six blocks under one header); answers that differ under one header say what
    differs."""
    folder = policies(tmp_path)
    web = [
        endpoint("shop", "web", "k8s:version=v1", pod_name="web-a"),
        endpoint("shop", "web", "k8s:version=v1", pod_name="web-b"),
        endpoint("shop", "web", "k8s:version=v2", pod_name="web-c"),
    ]
    capture = tmp_path / "drops.jsonl"
    capture.write_text(jsonl([flow_dict(w, API, tcp=8080) for w in web]))
    code, data = why(capture, folder)
    assert code == 0
    (answer,) = data["answers"]
    assert answer["flows"] == 3 and answer["allowed"] is True
    narrow = yaml.safe_load(yaml.safe_dump(POLICY))
    narrow["spec"]["ingress"][0]["fromEndpoints"] = [
        {"matchLabels": {"app": "web", "version": "v1"}}
    ]
    (folder / "api.yaml").write_text(yaml.safe_dump(narrow))
    code, data = why(capture, folder)
    assert code == 3  # one kind is denied now
    lines = sorted(a["traffic"] for a in data["answers"])
    assert len(lines) == 2 and len(set(lines)) == 2
    assert any("source version=v2" in line for line in lines)
    assert {a["flows"] for a in data["answers"]} == {1, 2}


def test_answers_of_one_traffic_line_are_told_apart_by_their_drop_reason(tmp_path: Path) -> None:
    """The example's first answer was labelled "[another recording of the same traffic]":
    the answers under that line differ by how Hubble dropped the flows, so that is the
    label; nothing is called another recording unless an earlier answer is the recording."""
    from conftest import EXAMPLE

    folder = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(folder), "-q").returncode == 0
    _code, data = why(EXAMPLE, folder)
    lines = [a["traffic"] for a in data["answers"]]
    assert not any("another recording" in line for line in lines)
    cart = "egress  shop/cart → payments/payments-api TCP/8443"
    assert [line for line in lines if line.startswith(cart)] == [
        f"{cart} [dropped with POLICY_DENIED]",
        f"{cart} [dropped with CT_MAP_INSERTION_FAILED]",
        f"{cart} [dropped with STALE_OR_UNROUTABLE_IP]",
    ]
    first = data["answers"][0]
    assert first["traffic"].endswith(f"[dropped with {first['drop_reason']}]")


def test_a_capture_with_more_kinds_than_are_answered_says_how_many_it_left_out(
    tmp_path: Path,
) -> None:
    """why answers the 1,000 most frequent kinds; the text and -o json say how many there
    were (it used to say "1000 kind(s)" of a capture with more)."""
    folder = policies(tmp_path)
    capture = tmp_path / "many.jsonl"
    flows = [flow_dict(endpoint("shop", "web"), API, tcp=1 + i) for i in range(1002)]
    flows += [flow_dict(endpoint("shop", "web"), API, tcp=5000)] * 3  # the most frequent
    capture.write_text(jsonl(flows))
    text = cpg("why", str(capture), "-d", str(folder)).stdout
    assert text.startswith("the 1,000 most frequent of 1,003 kinds of flow"), text[:200]
    assert "-o json lists the 1,000" in text
    code, answered = why(capture, folder)
    assert code == 3 and answered["kinds"] == 1003 and len(answered["answers"]) == 1000
    assert answered["answers"][0]["traffic"].endswith("TCP/5000")


def test_why_trace_and_verify_take_the_evidence_and_say_what_stands_behind_a_rule(
    tmp_path: Path,
) -> None:
    """why, verify and trace refused the --evidence-dir plan, report and explain take: they
    take it now, and an admitted flow says how much traffic stands behind its rule."""
    from conftest import EXAMPLE

    common = ["-d", "p", "--evidence-dir", "ev"]
    assert cpg("replay", str(EXAMPLE), *common, "-q", cwd=tmp_path).returncode == 0
    for command in ("verify", "plan", "why", "trace", "report", "explain", "drift"):
        assert "--evidence-dir" in cpg(command, "-h").stdout, command
    behind = "5 flows, first seen 2026-11-02 09:30:07 UTC, last seen 2026-11-02 09:33:02 UTC"
    where = "(evidence of shop/cpg-cart)"
    _code, data = why(EXAMPLE, tmp_path / "p", "--evidence-dir", str(tmp_path / "ev"))
    first = data["answers"][0]
    assert first["allowed"] and first["evidence"] == f"{behind} {where}"
    traced = cpg(
        "trace",
        "--from",
        "shop/frontend",
        "--to",
        "shop/cart",
        "--port",
        "8080",
        *common,
        cwd=tmp_path,
    )
    assert f"  evidence: {behind} {where}" in traced.stdout
    checked = cpg("verify", str(EXAMPLE), *common, cwd=tmp_path)
    line = next(x for x in checked.stdout.splitlines() if "shop/frontend → shop/cart TCP/8080" in x)
    assert line.endswith(f"; evidence: {behind} {where}")
    elsewhere = cpg("verify", str(EXAMPLE), "-d", "p", "--evidence-dir", "none", cwd=tmp_path)
    assert elsewhere.returncode == 0 and "evidence:" not in elsewhere.stdout
