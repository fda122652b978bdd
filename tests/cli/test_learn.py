"""Learning from the traffic that works today: --learn forwarded (issue 32)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml

from captures import learn_capture
from conftest import CORPUS, cpg


def replay(capture: Path, out: Path, *args: str) -> dict[str, Any]:
    ran = cpg("replay", str(capture), "-d", str(out), "-o", "json", *args)
    assert ran.returncode == 0, ran.stderr
    report: dict[str, Any] = json.loads(ran.stdout)
    return report


def peers(policy: Path, section: str) -> list[tuple[str, list[str]]]:
    doc = yaml.safe_load(policy.read_text())
    out = []
    for rule in doc["spec"].get(section, []):
        labels = (rule.get("fromEndpoints") or rule.get("toEndpoints") or [{}])[0].get(
            "matchLabels"
        )
        ports = [
            f"{p['protocol']}/{p['port']}" for e in rule.get("toPorts", []) for p in e["ports"]
        ]
        out.append((json.dumps(labels, sort_keys=True), ports))
    return out


def test_learning_writes_the_requests_and_never_the_replies_probes_or_health(
    tmp_path: Path,
) -> None:
    capture = learn_capture(tmp_path / "works.jsonl")
    out = tmp_path / "policies"
    report = replay(capture, out, "--learn", "forwarded", "--evidence-dir", str(tmp_path / "e"))
    flows = report["flows"]
    assert flows["candidate"] == 6  # 2 pods x (egress + ingress to cart, DNS)
    assert flows["judged_reply"] == 2  # the SYN+ACK and the segment to port 45678
    assert flows["node_local"] == 1 and flows["noise"] == 1 and flows["already_allowed"] == 1
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*.yaml")) == [
        "shop/cart.yaml",
        "shop/frontend.yaml",
    ]
    # cart: only the frontend on 8080 (no host, no health, no gateway, no port 45678)
    assert peers(out / "shop" / "cart.yaml", "ingress") == [('{"app": "frontend"}', ["TCP/8080"])]
    egress = peers(out / "shop" / "frontend.yaml", "egress")
    assert ('{"app": "cart"}', ["TCP/8080"]) in egress
    # the lookups the capture shows on UDP, and TCP/53 that resolvers fall back to (§D47)
    assert any("kube-dns" in labels and ports == ["TCP/53", "UDP/53"] for labels, ports in egress)
    assert all("45678" not in " ".join(ports) for _, ports in egress)
    (doc,) = [json.loads(p.read_text()) for p in (tmp_path / "e").rglob("cart.json")]
    (rule,) = doc["rules"]
    assert rule["classes"] == {"forwarded": 2}
    assert {(s["verdict"], s["drop_reason"]) for s in rule["samples"]} == {("FORWARDED", "")}
    explained = cpg("explain", "shop/cart", "-d", str(out), "--evidence-dir", str(tmp_path / "e"))
    assert "flows:      2 (forwarded 2)" in explained.stdout
    reported = cpg("report", "-d", str(out), "--evidence-dir", str(tmp_path / "e"))
    assert (
        "| ingress | TCP/8080 from shop/app=frontend | 2 (learned: forwarded 2) |"
        in reported.stdout
    )
    # plan over the same capture: nothing that works would break; verify agrees
    planned = cpg("plan", str(capture), "-d", str(out), "-o", "json")
    assert planned.returncode == 0, planned.stdout
    assert json.loads(planned.stdout)["verdict"] == "nothing_breaks"
    checked = cpg("verify", str(capture), "-d", str(out), "--learn", "forwarded", "-o", "json")
    assert checked.returncode == 0 and json.loads(checked.stdout)["candidates"]["total"] == 6
    # --allow-localhost policy: the node's probe needs a rule; --learn-allowed: the gateway too
    more = replay(
        capture,
        tmp_path / "more",
        "--learn",
        "forwarded",
        "--allow-localhost",
        "policy",
        "--learn-allowed",
        "--no-evidence",
    )
    assert more["flows"]["candidate"] == 8
    cart = (tmp_path / "more" / "shop" / "cart.yaml").read_text()
    assert "fromEntities" in cart and "host" in cart and "app: gateway" in cart


def _normalised(text: str) -> str:
    """Evidence with what tells learned from dropped blanked: the verdict and drop reason of
    samples, the class, and the run's own session."""
    doc = json.loads(text)
    for rule in doc["rules"]:
        rule["classes"] = {"-": sum(rule["classes"].values())}
        rule["by_session"] = {}
        rule["contributing_sessions"] = []
        for sample in rule["samples"]:
            sample["verdict"] = sample["drop_reason"] = "-"
    doc["sessions"] = []
    return json.dumps(doc, sort_keys=True)


def test_learned_policies_are_the_policies_the_same_drops_give(tmp_path: Path) -> None:
    learned, dropped = tmp_path / "learned", tmp_path / "dropped"
    replay(
        learn_capture(tmp_path / "works.jsonl"),
        learned / "p",
        "--learn",
        "forwarded",
        "--evidence-dir",
        str(learned / "e"),
    )
    replay(
        learn_capture(tmp_path / "drops.jsonl", as_drops=True),
        dropped / "p",
        "--evidence-dir",
        str(dropped / "e"),
    )
    for name in ("shop/cart.yaml", "shop/frontend.yaml"):
        assert (learned / "p" / name).read_bytes() == (dropped / "p" / name).read_bytes(), name
    learned_ev = sorted((learned / "e").rglob("*.json"))
    dropped_ev = sorted((dropped / "e").rglob("*.json"))
    assert [p.name for p in learned_ev] == [p.name for p in dropped_ev]
    for one, other in zip(learned_ev, dropped_ev, strict=True):
        if one.name == "cluster-health.json":
            continue
        assert _normalised(one.read_text()) == _normalised(other.read_text()), one.name


def test_a_capture_without_drops_says_which_ways_lead_to_policies(tmp_path: Path) -> None:
    capture = learn_capture(tmp_path / "works.jsonl")
    ran = cpg("replay", str(capture), "-d", str(tmp_path / "p"), "--no-evidence")
    assert ran.returncode == 0
    assert "No flow was denied" in ran.stdout
    assert "--learn forwarded" in ran.stdout and "cpg bootstrap" in ran.stdout
    assert "audit mode" in ran.stdout and "hubble observe --verdict DROPPED" in ran.stdout
    learned = cpg(
        "replay", str(capture), "-d", str(tmp_path / "q"), "--no-evidence", "--learn", "forwarded"
    )
    assert "No flow was denied" not in learned.stdout
    bad = cpg("replay", str(capture), "-d", str(tmp_path / "r"), "--learn", "everything")
    assert bad.returncode == 2 and "--learn" in bad.stderr
    alone = cpg("replay", str(capture), "-d", str(tmp_path / "r"), "--learn-allowed")
    assert alone.returncode == 2 and "--learn-allowed" in alone.stderr


CORPUS_FILES = sorted(CORPUS.glob("*.json*")) if CORPUS.exists() else []


@pytest.mark.skipif(not CORPUS_FILES, reason="../shared/corpus is absent")
@pytest.mark.parametrize("path", CORPUS_FILES, ids=lambda p: p.name)
def test_learning_on_the_real_captures_breaks_nothing_it_could_name(
    tmp_path: Path, path: Path
) -> None:
    out = tmp_path / "p"
    report = replay(path, out, "--learn", "forwarded", "--no-evidence")
    unnamed = {
        re.sub(r" TCP/\d+$| UDP/\d+$", "", f["subject"]).split(" → ")[-1]
        for f in report["findings"]
        if f["kind"] == "world_is_pod"
    }
    planned = json.loads(cpg("plan", str(path), "-d", str(out), "-o", "json").stdout)
    # what would break is only traffic to pods Hubble reported as world with no labels in the
    # capture: cpg writes no rule it cannot name (a toCIDR never selects a pod), and says so
    # and traffic the capture shows at one end only: learning writes the rules of the end
    # that saw it; the plan names the other end's missing rule, and --write-fixes adds it
    one_end = [b for b in planned["would_break"] if "the capture shows this traffic" in b["why"]]
    broken_ips = {
        b["traffic"]["sample"].split(" → ")[1].split(" ")[0]
        for b in planned["would_break"]
        if b not in one_end
    }
    assert broken_ips <= unnamed, (broken_ips, unnamed)
    if one_end:
        fixed = cpg("plan", str(path), "-d", str(out), "--write-fixes")
        assert fixed.returncode in (0, 3), fixed.stderr
        again = json.loads(cpg("plan", str(path), "-d", str(out), "-o", "json").stdout)
        assert not [b for b in again["would_break"] if "the capture shows this" in b["why"]]
    checked = json.loads(
        cpg("verify", str(path), "-d", str(out), "--learn", "forwarded", "-o", "json").stdout
    )
    # every flow checked is admitted; a capture with none to check cannot pass
    assert checked["verdict"] in ("passed", "cannot_judge"), checked["candidates"]
    assert checked["verdict"] == "passed" or not checked["checks"]


def test_next_steps_check_with_the_flags_that_made_the_rules(tmp_path: Path) -> None:
    """After ``--learn forwarded``, Next steps said ``cpg verify CAPTURE -d DIR``, which
    checks no learned flow (0/0): it repeats the flags now, and that command admits all."""
    capture = learn_capture(tmp_path / "works.jsonl")
    out = tmp_path / "p"
    ran = cpg("replay", str(capture), "-d", str(out), "--learn", "forwarded", "--no-evidence")
    assert ran.returncode == 0, ran.stderr
    (line,) = [
        line for line in ran.stderr.splitlines() + ran.stdout.splitlines() if "check:" in line
    ]
    command = line.split("check:", 1)[1].split()
    assert command[:2] == ["cpg", "verify"] and command[-2:] == ["--learn", "forwarded"]
    checked = cpg(*command[1:], "-o", "json")
    assert checked.returncode == 0, checked.stdout
    report = json.loads(checked.stdout)
    assert report["passed"] is True and report["candidates"]["total"] > 0


def test_learning_reads_audit_flows(tmp_path: Path) -> None:
    """On a capture taken in audit mode the traffic that would break is AUDIT: learning
    skipped it unless --include-audit was given, and said nothing. It is traffic that works
    today, so learning writes its rules (class audit in the evidence)."""
    from conftest import flow_dict, jsonl

    capture = tmp_path / "audit.jsonl"
    capture.write_text(
        jsonl(
            [
                flow_dict(verdict="AUDIT", reason="POLICY_DENIED", tcp=8080),
                flow_dict(verdict="AUDIT", reason="POLICY_DENIED", tcp=8080, reply=True),
            ]
        )
    )
    out = tmp_path / "p"
    report = replay(capture, out, "--learn", "forwarded", "--evidence-dir", str(tmp_path / "e"))
    policy = yaml.safe_load((out / "shop" / "cart.yaml").read_text())
    (rule,) = policy["spec"]["ingress"]
    assert rule["toPorts"][0]["ports"][0]["port"] == "8080"
    assert report["flows"]["candidate"] == 1 and report["flows"]["reply"] == 1
    explained = cpg("explain", "shop/cart", "-d", str(out), "--evidence-dir", str(tmp_path / "e"))
    assert "audit" in explained.stdout


def test_learning_covers_traffic_seen_at_its_other_end_only(tmp_path: Path) -> None:
    """A capture often shows one end of a connection only (one node's Hubble, a sample).
    frontend → cart is seen arriving at cart; frontend's egress to the API is seen leaving
    it: the egress policy learned for frontend must carry cart too, or applying it breaks
    frontend → cart (cpg plan said so on a real capture). A pod seen only at the other end
    (batch → cart) gets no egress policy of its own from that view."""
    from conftest import endpoint, flow_dict, jsonl

    frontend, cart = endpoint("shop", "frontend"), endpoint("shop", "cart")
    api, batch = endpoint("shop", "api"), endpoint("shop", "batch")
    works = {"verdict": "FORWARDED", "reason": None}
    capture = tmp_path / "works.jsonl"
    capture.write_text(
        jsonl(
            [
                flow_dict(frontend, cart, direction="INGRESS", tcp=8080, **works),
                flow_dict(frontend, api, direction="EGRESS", tcp=9000, **works),
                flow_dict(batch, cart, direction="INGRESS", tcp=8080, **works),
            ]
        )
    )
    out = tmp_path / "p"
    replay(capture, out, "--learn", "forwarded", "--no-evidence")
    egress = yaml.safe_load((out / "shop" / "frontend.yaml").read_text())["spec"]["egress"]
    peers = {rule["toEndpoints"][0]["matchLabels"].get("app") for rule in egress}
    assert peers == {"api", "cart", None}  # None: kube-dns, as every egress policy (§D47)
    assert not (out / "shop" / "batch.yaml").exists()
    cart_in = yaml.safe_load((out / "shop" / "cart.yaml").read_text())["spec"]
    assert "egress" not in cart_in
    planned = json.loads(cpg("plan", str(capture), "-d", str(out), "-o", "json").stdout)
    assert planned["would_break"] == []
