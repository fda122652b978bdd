"""L7: HTTP rules per port, toFQDNs with the resolver's DNS rule, merges, evidence."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import EXAMPLE, WORLD, assert_crd_valid, cpg, endpoint, flow_dict, jsonl
from cpg_core._base.l7 import dns_name, is_identifier, path_regex, url_path

FIXTURES = Path(__file__).parent.parent / "fixtures"


def replay(
    tmp_path: Path, name: str, *captures: Path, extra: tuple[str, ...] = ("--l7",)
) -> dict[str, str]:
    out = tmp_path / name
    for capture in captures:
        result = cpg(
            "replay", str(capture), "-d", str(out), "--evidence-dir", str(tmp_path / "ev"), *extra
        )
        assert result.returncode == 0, result.stderr
    files = {str(p.relative_to(out)): p.read_text() for p in sorted(out.rglob("*.yaml"))}
    for text in files.values():
        assert_crd_valid(text, required=True)
    return files


@pytest.mark.parametrize(
    ("url", "collapse", "regex"),
    [
        ("/api/v1/users", False, "^/api/v1/users$"),
        ("/api/v1/orders?id=42", False, "^/api/v1/orders$"),
        ("http://api:8080/x/y?q=1#frag", False, "^/x/y$"),
        ("", False, "^/$"),
        ("/a.b+c*d?e", False, "^/a\\.b\\+c\\*d$"),
        ("/f(1)[2]{3}|^$", False, "^/f\\(1\\)\\[2\\]\\{3\\}\\|\\^\\$$"),
        (
            "/users/17/orders/9f1c2b7a-4d4e-4c1f-9a2b-0c1d2e3f4a5b",
            True,
            "^/users/[^/]+/orders/[^/]+$",
        ),
        ("/blobs/0123456789abcdef0123", True, "^/blobs/[^/]+$"),
        ("/v2/users/me", True, "^/v2/users/me$"),
        ("/users/17", False, "^/users/17$"),
    ],
)
def test_paths(url: str, collapse: bool, regex: str) -> None:
    assert path_regex(url, collapse) == regex


def test_helpers() -> None:
    assert url_path("//host/p?q") == "/p"
    assert is_identifier("123") and is_identifier("deadbeefdeadbeef") and not is_identifier("v2")
    assert dns_name(" API.Example.com. ") == "api.example.com"


def test_http_rules_snapshot(tmp_path: Path, snapshot: Any) -> None:
    files = replay(tmp_path, "http", FIXTURES / "l7_http.jsonl")
    text = files["shop/api.yaml"]
    assert "host:" not in text and "headers" not in text and "headerMatches" not in text
    assert '"^/api/v1/users$"' in text and "?x=1" not in text
    assert text == snapshot(name="http")
    collapsed = replay(
        tmp_path, "collapsed", FIXTURES / "l7_http.jsonl", extra=("--l7", "--l7-collapse-paths")
    )
    assert '"^/api/v1/users/[^/]+$"' in collapsed["shop/api.yaml"]
    assert "users/17" not in collapsed["shop/api.yaml"]
    assert '"^/api/v1/users$"' in collapsed["shop/api.yaml"], "literal segments are kept"


def test_dns_and_fqdn_snapshot(tmp_path: Path, snapshot: Any) -> None:
    files = replay(tmp_path, "dns", FIXTURES / "l7_dns.jsonl")
    policy = yaml.safe_load(files["shop/api.yaml"])
    fqdns = [r["toFQDNs"][0]["matchName"] for r in policy["spec"]["egress"] if "toFQDNs" in r]
    # learned from an answer seen before the flow, one seen after it, and destination_names
    assert fqdns == ["api.example.com", "cdn.example.org", "later.example.net"]
    assert not any("toCIDR" in r for r in policy["spec"]["egress"]), (
        "named world peers are not CIDRs"
    )
    (resolver,) = [r for r in policy["spec"]["egress"] if "toEndpoints" in r]
    assert [p["protocol"] for p in resolver["toPorts"][0]["ports"]] == ["UDP", "TCP"]
    # the cluster's resolver answers every name (Cilium's visibility rule): the names seen
    # are the toFQDNs peers, never an allowlist of what the workload may resolve (§D47)
    assert resolver["toPorts"][0]["rules"]["dns"] == [{"matchPattern": "*"}]
    assert not any(p.startswith("kube-system/") for p in files), "the resolver never gets a policy"
    assert files["shop/api.yaml"] == snapshot(name="dns")


def test_resolver_rule_follows_the_observed_resolver(tmp_path: Path) -> None:
    files = replay(tmp_path, "nodelocal", FIXTURES / "l7_nodelocal.jsonl")
    egress = yaml.safe_load(files["shop/web.yaml"])["spec"]["egress"]
    selectors = [r["toEndpoints"][0]["matchLabels"] for r in egress if "toEndpoints" in r]
    assert selectors == [
        {"io.kubernetes.pod.namespace": "kube-system", "k8s-app": "node-local-dns"}
    ]
    # With no DNS query seen, the rule falls back to kube-dns in kube-system.
    capture = tmp_path / "names.jsonl"
    capture.write_text(
        jsonl(
            [
                flow_dict(
                    src=endpoint("shop", "web"),
                    dst=WORLD,
                    direction="EGRESS",
                    tcp=443,
                    dst_ip="192.0.2.7",
                    destination_names=["svc.example.com."],
                )
            ]
        )
    )
    fallback = yaml.safe_load(replay(tmp_path, "fallback", capture)["shop/web.yaml"])["spec"][
        "egress"
    ]
    selectors = [r["toEndpoints"][0]["matchLabels"] for r in fallback if "toEndpoints" in r]
    assert selectors == [{"io.kubernetes.pod.namespace": "kube-system", "k8s-app": "kube-dns"}]
    assert len([r for r in fallback if "toEndpoints" in r]) == 1, "one resolver rule per policy"


def test_mixed_and_merge_snapshot(tmp_path: Path, snapshot: Any) -> None:
    first = [FIXTURES / "l7_dns.jsonl", FIXTURES / "l7_http.jsonl"]
    merged = replay(tmp_path, "merged", *first, FIXTURES / "l7_merge_more.jsonl")
    text = merged["shop/api.yaml"]
    policy = yaml.safe_load(text)
    fqdns = [r["toFQDNs"][0]["matchName"] for r in policy["spec"]["egress"] if "toFQDNs" in r]
    assert "new.example.com" in fqdns, "a name learned in a later run reaches toFQDNs"
    dns = [
        d
        for r in policy["spec"]["egress"]
        if "toEndpoints" in r
        for d in r["toPorts"][0]["rules"]["dns"]
    ]
    assert dns == [{"matchPattern": "*"}], "the resolver answers it: every name (§D47)"
    assert "method: DELETE" in text
    assert text == snapshot(name="merged")
    combined = tmp_path / "all.jsonl"
    combined.write_text("".join(p.read_text() for p in [*first, FIXTURES / "l7_merge_more.jsonl"]))
    assert replay(tmp_path, "single", combined)["shop/api.yaml"] == text, (
        "runs split or not: same bytes"
    )
    verdict = cpg(
        "verify", str(combined), "--policies", str(tmp_path / "merged"), "--output", "json"
    )
    assert verdict.returncode == 0, verdict.stdout
    assert json.loads(verdict.stdout)["candidates"]["total"] >= 10


def test_without_l7_nothing_changes(tmp_path: Path) -> None:
    plain = replay(tmp_path, "plain", FIXTURES / "l7_http.jsonl", extra=())
    assert "rules:" not in plain["shop/api.yaml"] and "toFQDNs" not in plain["shop/api.yaml"]
    assert '- port: "8080"' in plain["shop/api.yaml"]
    dns_plain = replay(tmp_path, "dnsplain", FIXTURES / "l7_dns.jsonl", extra=())
    assert "toCIDR" in dns_plain["shop/api.yaml"] and "toFQDNs" not in dns_plain["shop/api.yaml"]
    # --l7 on a capture without any L7 record writes the same rules as without it, but for
    # DNS, which is Cilium's visibility rule (every name through the DNS proxy, so the next
    # capture has the DNS records the two-step workflow needs).
    with_flag = tmp_path / "with"
    result = cpg("replay", str(EXAMPLE), "-d", str(with_flag), "--l7")
    assert "no flow in" in result.stderr and "L7 rules: the two-step workflow" in result.stderr
    cpg("replay", str(EXAMPLE), "-d", str(tmp_path / "without"))
    with_l7 = {p.name: yaml.safe_load(p.read_text()) for p in with_flag.rglob("*.yaml")}
    without = {
        p.name: yaml.safe_load(p.read_text()) for p in (tmp_path / "without").rglob("*.yaml")
    }
    visible = [
        rule
        for doc in with_l7.values()
        for rule in doc["spec"].get("egress", [])
        if rule.get("toPorts", [{}])[0].get("rules") == {"dns": [{"matchPattern": "*"}]}
    ]
    assert visible, "every egress policy resolves through the visibility rule"
    assert _without_dns_rules(with_l7) == _without_dns_rules(without)
    assert cpg("replay", str(EXAMPLE), "--l7-collapse-paths").returncode == 2


def _without_dns_rules(docs: dict[str, Any]) -> dict[str, Any]:
    """The documents with every rule on port 53 left out."""
    out = {}
    for name, doc in docs.items():
        spec = dict(doc["spec"])
        for way in ("ingress", "egress"):
            if way in spec:
                spec[way] = [
                    r
                    for r in spec[way]
                    if not any(
                        p["port"] == "53" for pr in r.get("toPorts", []) for p in pr["ports"]
                    )
                ]
        out[name] = spec
    return out


def test_l7_evidence_keys_and_concrete_paths(tmp_path: Path) -> None:
    out = tmp_path / "p"
    ev = tmp_path / "ev"
    assert (
        cpg(
            "replay",
            str(FIXTURES / "l7_http.jsonl"),
            "-d",
            str(out),
            "--evidence-dir",
            str(ev),
            "--l7",
            "--l7-collapse-paths",
        ).returncode
        == 0
    )
    shown = json.loads(
        cpg(
            "explain",
            "shop/api",
            "-d",
            str(out),
            "--evidence-dir",
            str(ev),
            "--json",
            "--http-method",
            "get",
            "--http-path",
            "^/api/v1/users/[^/]+$",
        ).stdout
    )
    (rule,) = shown["matched_rules"]
    assert rule["key"] == "ingress:ep:shop/app=web:TCP:8080:l7=http:GET:^/api/v1/users/[^/]+$"
    assert rule["l7"] == {
        "protocol": "http",
        "http_method": "GET",
        "http_path": "^/api/v1/users/[^/]+$",
    }
    assert rule["flow_count"] == 2
    assert [s["l7"] for s in rule["samples"]] == ["GET /api/v1/users/42"]  # newest per pod pair
    dns_out = tmp_path / "d"
    cpg(
        "replay",
        str(FIXTURES / "l7_dns.jsonl"),
        "-d",
        str(dns_out),
        "--evidence-dir",
        str(ev),
        "--l7",
    )
    dns = json.loads(
        cpg(
            "explain",
            "shop/api",
            "-d",
            str(dns_out),
            "--evidence-dir",
            str(ev),
            "--json",
            "--dns-pattern",
            "api.example.com.",
        ).stdout
    )
    keys = sorted(r["key"] for r in dns["matched_rules"])
    assert keys == [
        "egress:ep:kube-system/k8s-app=kube-dns:TCP:53:l7=dns:api.example.com",
        "egress:ep:kube-system/k8s-app=kube-dns:UDP:53:l7=dns:api.example.com",
    ]
    udp = next(r for r in dns["matched_rules"] if r["protocol"] == "UDP")
    assert udp["flow_count"] == 1 and udp["samples"][0]["l7"] == "DNS api.example.com"


def test_a_path_ending_in_a_newline_gets_a_rule_verify_agrees_with(tmp_path: Path) -> None:
    from conftest import flow_dict, jsonl

    def request(url: str) -> dict[str, object]:
        return flow_dict(l7={"type": "REQUEST", "http": {"method": "GET", "url": url}})

    capture = tmp_path / "odd-paths.jsonl"
    capture.write_text(jsonl([request("/a\n"), request("http://shop/b "), request("/c")]))
    out = tmp_path / "policies"
    assert cpg("replay", str(capture), "-d", str(out), "--l7", "--no-evidence").returncode == 0
    text = (out / "shop" / "cart.yaml").read_text()
    assert '"^/a\\n$"' in text and '"^/b $"' in text and '"^/c$"' in text
    verified = cpg("verify", str(capture), "-d", str(out))
    assert verified.returncode == 0, verified.stdout
    assert "3/3 candidate flows admitted" in verified.stdout


def _l4_beside_l7(policy: dict[str, Any]) -> list[str]:
    """(direction, peer, port) keys where Cilium would merge a plain L4 entry into an L7 one
    (and so allow every request): one selector, one port, with and without ``rules``."""
    seen: dict[tuple[str, str, str], set[bool]] = {}
    for direction in ("ingress", "egress"):
        for rule in policy["spec"].get(direction) or []:
            peers = [
                json.dumps(rule[key], sort_keys=True)
                for key in ("fromEndpoints", "toEndpoints", "fromEntities", "toEntities")
                if key in rule
            ]
            for entry in rule.get("toPorts") or []:
                for port in entry["ports"]:
                    for peer in peers:
                        key = (direction, peer, f"{port['port']}/{port['protocol']}")
                        seen.setdefault(key, set()).add("rules" in entry)
    return [" ".join(key) for key, kinds in seen.items() if kinds == {True, False}]


def test_an_l4_rule_never_sits_beside_an_l7_rule_on_one_peer_and_port(tmp_path: Path) -> None:
    api = endpoint("shop", "api", pod_name="api-1")
    dns = endpoint("kube-system", None, "k8s:k8s-app=kube-dns", pod_name="coredns-1")
    web = endpoint("shop", "web", pod_name="web-1")
    query = {"type": "REQUEST", "dns": {"query": "api.example.com.", "qtypes": ["A"]}}
    get = {"type": "REQUEST", "http": {"method": "GET", "url": "/health"}}
    records = [
        flow_dict(api, dns, direction="EGRESS", udp=53, l7=query),
        flow_dict(api, dns, direction="EGRESS", udp=53),  # the same lookup seen at L4 only
        flow_dict(api, dns, direction="EGRESS", tcp=53),
        flow_dict(web, api, tcp=8080, l7=get),
        flow_dict(web, api, tcp=8080),  # and the request's SYN, L4 only
    ]
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl(records))
    files = replay(tmp_path, "one", capture)
    policy = yaml.safe_load(files["shop/api.yaml"])
    assert _l4_beside_l7(policy) == []
    egress = [r for r in policy["spec"]["egress"] if "toEndpoints" in r]
    (dns_rule,) = egress  # the L4 lookups are expressed through the DNS rule
    assert dns_rule["toPorts"][0]["rules"]["dns"] == [{"matchPattern": "*"}]
    # a folder written without --l7 first, then with it: merged the same way
    plain = tmp_path / "plain.jsonl"
    plain.write_text(jsonl([records[1], records[4]]))
    merged = replay(tmp_path, "two", plain, extra=())
    assert 'port: "53"' in merged["shop/api.yaml"]
    merged = replay(tmp_path, "two", capture)
    assert _l4_beside_l7(yaml.safe_load(merged["shop/api.yaml"])) == []
    checked = cpg("verify", str(capture), "-d", str(tmp_path / "two"))
    assert checked.returncode == 0 and "5/5 candidate flows admitted" in checked.stdout


def test_a_dns_named_world_peer_says_l7_would_write_to_fqdns(tmp_path: Path) -> None:
    """A flow whose destination Hubble names (``destination_names``: example.com at a CDN
    address) became a toCIDR /32 of an address that changes, with no word of --l7: the
    summary now says --l7 would write toFQDNs, and with --l7 it does."""
    from conftest import WORLD, endpoint, flow_dict, jsonl

    capture = tmp_path / "named.jsonl"
    named = flow_dict(
        src=endpoint("shop", "api"),
        dst=WORLD,
        dst_ip="93.184.216.34",
        direction="EGRESS",
        tcp=443,
        destination_names=["example.com"],
    )
    capture.write_text(jsonl([named, named]))
    plain = cpg(
        "replay", str(capture), "-d", str(tmp_path / "plain"), "--no-evidence", "-o", "json"
    )
    assert plain.returncode == 0, plain.stderr
    (finding,) = [
        f for f in json.loads(plain.stdout)["findings"] if f["kind"] == "cidr_for_dns_name"
    ]
    assert finding["count"] == 2 and "(example.com)" in finding["subject"]
    assert "replay with L7 rules (l7)" in finding["fix"] and "toFQDNs" in finding["fix"]
    text = cpg("replay", str(capture), "-d", str(tmp_path / "plain2"), "--no-evidence")
    assert "toCIDR for a DNS name" in text.stdout + text.stderr
    l7 = cpg(
        "replay", str(capture), "-d", str(tmp_path / "l7"), "--no-evidence", "--l7", "-o", "json"
    )
    assert not [f for f in json.loads(l7.stdout)["findings"] if f["kind"] == "cidr_for_dns_name"]
    assert "matchName: example.com" in (tmp_path / "l7" / "shop" / "api.yaml").read_text()
