"""cpg drift (issue 31): the applied policies against what the cluster does now: traffic they
drop (a rule to add), selectors reaching pods with new labels, rules nobody uses."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from conftest import cpg, endpoint, flow_dict, jsonl
from fake_relay import fake_relay, responses_from_lines

WEB = endpoint("shop", "web", pod_name="web-1")


def cart(version: str, pod: str) -> dict[str, Any]:
    return endpoint("shop", "cart", f"k8s:version={version}", pod_name=pod)


def _applied(tmp_path: Path) -> Path:
    """cpg-cart made from web → cart v1 on 8080 (and admin → cart on 7070, never seen again)."""
    made = tmp_path / "made.jsonl"
    made.write_text(
        jsonl(
            [
                flow_dict(WEB, cart("v1", "cart-v1-a"), tcp=8080),
                flow_dict(endpoint("ops", "admin"), cart("v1", "cart-v1-a"), tcp=7070),
            ]
        )
    )
    out = tmp_path / "applied"
    ran = cpg("replay", str(made), "-d", str(out))
    assert ran.returncode == 0, ran.stderr
    return out


def drift_of(*args: str) -> tuple[int, dict[str, Any], str]:
    ran = cpg("drift", *args, "-o", "json")
    text = cpg("drift", *args)
    assert ran.returncode == text.returncode, (ran.stderr, text.stderr)
    return ran.returncode, json.loads(ran.stdout), text.stdout


def test_traffic_the_policies_drop_needs_a_rule(tmp_path: Path) -> None:
    out = _applied(tmp_path)
    now = tmp_path / "now.jsonl"
    now.write_text(
        jsonl(
            [
                flow_dict(WEB, cart("v1", "cart-v1-a"), tcp=9090),  # cart is policed: drift
                flow_dict(WEB, cart("v1", "cart-v1-a"), tcp=9090),
                flow_dict(WEB, endpoint("shop", "other"), tcp=9090),  # not this folder's
                flow_dict(WEB, cart("v1", "cart-v1-a"), tcp=8080, verdict="FORWARDED", reason=None),
            ]
        )
    )
    code, drift, text = drift_of(str(now), "-d", str(out), "--stale-after", "3650d")
    assert code == 3
    (needs,) = drift["needs_rule"]
    assert needs["policy"] == "shop/cpg-cart" and needs["traffic"]["flows"] == 2
    assert needs["traffic"]["port"] == 9090 and needs["drop_reason"] == "POLICY_DENIED"
    assert 'port: "9090"' in needs["rule_yaml"] and "app: web" in needs["rule_yaml"]
    assert drift["unseen_pods"] == [] and drift["stale_rules"] == []
    assert "NEEDS A RULE: 1 kinds of traffic" in text and "add to shop/cpg-cart" in text


def test_a_selector_reaching_pods_with_new_labels(tmp_path: Path) -> None:
    out = _applied(tmp_path)
    now = tmp_path / "now.jsonl"
    now.write_text(
        jsonl(
            [
                flow_dict(WEB, cart("v1", "cart-v1-b"), tcp=8080, verdict="FORWARDED", reason=None),
                flow_dict(WEB, cart("v2", "cart-v2-a"), tcp=8080, verdict="FORWARDED", reason=None),
                flow_dict(WEB, cart("v2", "cart-v2-b"), tcp=8080, verdict="FORWARDED", reason=None),
            ]
        )
    )
    code, drift, text = drift_of(str(now), "-d", str(out), "--stale-after", "3650d")
    assert code == 3
    (pods,) = drift["unseen_pods"]  # v1 pods, even new ones, were seen: only v2 is new
    assert pods["policy"] == "shop/cpg-cart" and pods["selector"] == {"app": "cart"}
    assert pods["unseen"] == {"version": "v2"} and pods["pods"] == ["cart-v2-a", "cart-v2-b"]
    assert drift["needs_rule"] == []
    assert "shop/cpg-cart selects app=cart: pods with version=v2 (cart-v2-a, cart-v2-b)" in text


def test_rules_no_flow_used_for_longer_than_stale_after(tmp_path: Path) -> None:
    out = _applied(tmp_path)
    now = tmp_path / "now.jsonl"
    now.write_text(  # web → cart 8080 is in use 18 days later; ops/admin → cart 7070 is not
        jsonl(
            [
                flow_dict(
                    WEB,
                    cart("v1", "cart-v1-a"),
                    tcp=8080,
                    verdict="FORWARDED",
                    reason=None,
                    time="2026-11-20T10:00:00Z",
                )
            ]
        )
    )
    code, drift, text = drift_of(str(now), "-d", str(out), "--stale-after", "7d")
    assert code == 3
    (stale,) = drift["stale_rules"]
    assert stale["policy"] == "shop/cpg-cart" and "ops" in stale["rule"] and "7070" in stale["rule"]
    assert stale["last_seen"].startswith("2026-11-02") and stale["idle_days"] == 18.0
    assert drift["reference"].startswith("2026-11-20T10:00:00")  # the capture's newest flow
    assert "STALE: 1 rules no flow has used for more than 7 days" in text
    code, drift, text = drift_of(str(now), "-d", str(out), "--stale-after", "3650d")
    assert code == 0 and drift["drifted"] is False and "No drift found (" in text


def test_drift_of_live_traffic_and_bad_flags(tmp_path: Path) -> None:
    out = _applied(tmp_path)
    lines = jsonl([flow_dict(WEB, cart("v1", "cart-v1-a"), tcp=9090)]).splitlines()
    with fake_relay(responses_from_lines(lines)) as (relay, address):
        ran = cpg(
            "drift",
            "--server",
            address,
            "-d",
            str(out),
            "--duration",
            "1s",
            "-o",
            "json",
            "--stale-after",
            "3650d",
        )
    assert ran.returncode == 3, ran.stderr
    drift = json.loads(ran.stdout)
    assert drift["flows"] == 1 and drift["needs_rule"][0]["traffic"]["port"] == 9090
    assert drift["source"] == f"Hubble Relay {address}"
    assert [sorted(f.verdict) for f in relay.requests[0].whitelist] == [[1, 2, 4, 5]]
    neither = cpg("drift", "-d", str(out))
    assert neither.returncode == 2 and "not both and not neither" in neither.stderr
    bad = cpg("drift", "x.jsonl", "-d", str(out), "--stale-after", "soon")
    assert bad.returncode == 2 and "--stale-after" in bad.stderr


def test_a_capture_is_judged_as_of_its_newest_flow(tmp_path: Path) -> None:
    """Right after a replay, the drift of the same capture finds no rule stale, whatever the
    day it is read (it counted from the clock: every rule of a month-old capture was stale),
    and the DNS rules written for the cluster, which no flow asked for, are never stale."""
    from conftest import EXAMPLE

    out = tmp_path / "policies"
    assert cpg("replay", str(EXAMPLE), "-d", str(out)).returncode == 0
    assert "kube-dns" in "".join(p.read_text() for p in out.rglob("*.yaml"))
    ran = cpg("drift", str(EXAMPLE), "-d", str(out), "-o", "json")
    drift = json.loads(ran.stdout)
    assert drift["stale_rules"] == [], drift["stale_rules"]
    times = [
        json.loads(line)["flow"].get("time", "")
        for line in EXAMPLE.read_text().splitlines()
        if line.startswith('{"flow"')
    ]
    assert drift["reference"][:19] == max(times)[:19]
    # What the folder admits is not traffic that needs a rule (the policies selecting an
    # endpoint reached the matcher as models and selected nothing: every drop the folder's
    # own rules admit was listed), and drops no allow rule can express are not drift: the
    # drift of the capture a replay just turned into policies is none.
    assert ran.returncode == 0, ran.stdout
    assert drift["drifted"] is False and drift["needs_rule"] == []
    cannot = {
        (n["traffic"]["source"], n["traffic"]["destination"], n["traffic"]["port"])
        for n in drift["no_rule_can_fix"]
    }
    assert cannot == {
        ("payments/payments-api", "world", 443),  # no IP
        ("shop/debug-shell", "shop/cart", 8080),  # no usable labels
        ("shop/frontend", "shop/cart", 0),  # no port
    }
    text = cpg("drift", str(EXAMPLE), "-d", str(out)).stdout
    assert "NO RULE CAN FIX: 3 kinds" in text and "No drift found (" in text
