from __future__ import annotations

import pytest
import yaml
from hypothesis import given, settings, strategies as st

from conftest import assert_crd_valid
from cpg_core._base.rules import (
    Atom,
    CidrPeer,
    EndpointPeer,
    EntityPeer,
    Rule,
    describe_rule,
    rules_from_atoms,
)
from cpg_core._base.yaml_text import emit, yaml_scalar
from cpg_core._policy.write import rule_from_dict, rule_to_dict
from cpg_core._synthesis.render import (
    policy_document,
    render_policy,
    rule_lines,
    rule_lines_generic,
)

SELECTOR = (("app", "api"),)
CLIENT = EndpointPeer("default", (("app", "client"),))


def render(atoms: list[Atom], namespace: str = "prod") -> str:
    return render_policy("cpg-api", namespace, SELECTOR, rules_from_atoms(atoms))


def test_readable_layout_quoted_ports_and_a_comment_per_rule() -> None:
    text = render([Atom("ingress", CLIENT, "TCP", 8443), Atom("ingress", CLIENT, "TCP", 8080)])
    assert text == (
        "apiVersion: cilium.io/v2\n"
        "kind: CiliumNetworkPolicy\n"
        "metadata:\n"
        "  name: cpg-api\n"
        "  namespace: prod\n"
        "  labels:\n"
        "    app.kubernetes.io/managed-by: cpg\n"
        "spec:\n"
        "  endpointSelector:\n"
        "    matchLabels:\n"
        "      app: api\n"
        "  ingress:\n"
        "  # TCP/8080, TCP/8443 from default/app=client\n"
        "  - fromEndpoints:\n"
        "    - matchLabels:\n"
        "        app: client\n"
        "        io.kubernetes.pod.namespace: default\n"
        "    toPorts:\n"
        "    - ports:\n"
        '      - port: "8080"\n'
        "        protocol: TCP\n"
        '      - port: "8443"\n'
        "        protocol: TCP\n"
    )
    assert_crd_valid(text, required=True)
    assert "status" not in text and "creationTimestamp" not in text


def test_same_namespace_peer_has_no_namespace_label() -> None:
    text = render([Atom("egress", EndpointPeer("prod", (("app", "db"),)), "TCP", 5432)])
    assert "io.kubernetes.pod.namespace" not in text
    assert "# TCP/5432 to prod/app=db\n" in text


def test_icmp_never_shares_a_rule_with_ports() -> None:
    peer = EntityPeer("kube-apiserver")
    rules = rules_from_atoms([Atom("egress", peer, "TCP", 6443), Atom("egress", peer, "ICMPv4", 8)])
    assert [r.kind for r in rules] == ["ports", "icmp"]
    data = [rule_to_dict(r, "prod") for r in rules]
    assert "icmps" not in data[0] and "toPorts" not in data[1]
    assert data[1]["icmps"] == [{"fields": [{"family": "IPv4", "type": 8}]}]
    text = render_policy("cpg-api", "prod", SELECTOR, rules)
    assert "# ICMPv4 type 8 to entity kube-apiserver" in text
    assert_crd_valid(text, required=True)


def test_45_ports_are_split_into_port_rules_of_at_most_40() -> None:
    atoms = [Atom("ingress", CLIENT, "TCP", 1000 + 2 * i) for i in range(45)]  # no runs
    (rule,) = rules_from_atoms(atoms)
    data = rule_to_dict(rule, "prod")
    assert [len(pr["ports"]) for pr in data["toPorts"]] == [40, 5]
    assert_crd_valid(render(atoms), required=True)


def test_45_icmp_types_are_split_too() -> None:
    atoms = [Atom("ingress", CLIENT, "ICMPv6", i) for i in range(45)]
    (rule,) = rules_from_atoms(atoms)
    assert [len(i["fields"]) for i in rule_to_dict(rule, "prod")["icmps"]] == [40, 5]
    assert_crd_valid(render(atoms), required=True)


def test_ipv6_world_peer_gets_128() -> None:
    text = render([Atom("egress", CidrPeer("2001:db8::1/128"), "TCP", 443)])
    assert '- "2001:db8::1/128"' in text
    assert yaml.safe_load(text)["spec"]["egress"][0]["toCIDR"] == ["2001:db8::1/128"]
    assert_crd_valid(text, required=True)


def test_canonical_order_ignores_input_order() -> None:
    atoms = [
        Atom("egress", CidrPeer("10.0.0.2/32"), "TCP", 443),
        Atom("ingress", CLIENT, "UDP", 53),
        Atom("egress", EntityPeer("host"), "TCP", 1),
        Atom("egress", CidrPeer("10.0.0.10/32"), "TCP", 443),
        Atom("ingress", CLIENT, "TCP", 53),
        Atom("egress", CidrPeer("9.0.0.1/32"), "TCP", 443),
    ]
    assert render(atoms) == render(list(reversed(atoms)))
    egress = yaml.safe_load(render(atoms))["spec"]["egress"]
    assert [next(iter(r.values())) for r in egress] == [
        ["host"],
        ["9.0.0.1/32", "10.0.0.2/32", "10.0.0.10/32"],  # same port: one toCIDR list
    ]


def test_cidrs_on_the_same_ports_are_one_rule_and_merge_as_one() -> None:
    from cpg_core._synthesis.merge import merge_policy_text

    atoms = [
        Atom("egress", CidrPeer("10.0.0.2/32"), "TCP", 443),
        Atom("egress", CidrPeer("10.0.0.3/32"), "TCP", 443),
        Atom("egress", CidrPeer("10.0.0.4/32"), "TCP", 8443),
    ]
    text = render(atoms)
    assert_crd_valid(text, required=True)
    egress = yaml.safe_load(text)["spec"]["egress"]
    assert [(r["toCIDR"], r["toPorts"][0]["ports"][0]["port"]) for r in egress] == [
        (["10.0.0.2/32", "10.0.0.3/32"], "443"),
        (["10.0.0.4/32"], "8443"),
    ]
    assert "# TCP/443 to 10.0.0.2/32, 10.0.0.3/32" in text
    more = rules_from_atoms([Atom("egress", CidrPeer("10.0.0.1/32"), "TCP", 443)])
    merged = merge_policy_text(
        text, name="cpg-api", namespace="prod", selector=SELECTOR, rules=more
    )
    egress = yaml.safe_load(merged)["spec"]["egress"]
    assert [r["toCIDR"] for r in egress] == [
        ["10.0.0.1/32", "10.0.0.2/32", "10.0.0.3/32"],
        ["10.0.0.4/32"],
    ]
    again = merge_policy_text(
        merged, name="cpg-api", namespace="prod", selector=SELECTOR, rules=more
    )
    assert again == merged


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("web", "web"),
        ("app.kubernetes.io/name", "app.kubernetes.io/name"),
        ("8080", '"8080"'),
        ("true", '"true"'),
        ("yes", '"yes"'),
        ("null", '"null"'),
        ("1.5", '"1.5"'),
        ("0x1F", '"0x1F"'),
        ("a: b", '"a: b"'),
        ("#x", '"#x"'),
        ("", '""'),
        ("-lead", '"-lead"'),
        ("ünï", '"\\u00fcn\\u00ef"'),
        ("tab\tin", '"tab\\tin"'),
        (5, "5"),
        (True, "true"),
    ],
)
def test_scalars_read_back_as_themselves(value: object, expected: str) -> None:
    assert yaml_scalar(value) == expected
    assert yaml.safe_load(f"k: {expected}")["k"] == value


label_text = st.text(
    alphabet=st.characters(min_codepoint=32, max_codepoint=0x2FF), min_size=1, max_size=12
)
peers = st.one_of(
    st.builds(EntityPeer, st.sampled_from(["host", "remote-node", "kube-apiserver", "health"])),
    st.builds(lambda i: CidrPeer(f"10.0.{i // 256}.{i % 256}/32"), st.integers(0, 65535)),
    st.builds(
        lambda ns, labels: EndpointPeer(ns, tuple(sorted(labels.items()))),
        st.sampled_from(["prod", "other"]),
        st.dictionaries(label_text, label_text, min_size=1, max_size=3),
    ),
)
atoms_strategy = st.lists(
    st.one_of(
        st.builds(
            Atom,
            st.sampled_from(["ingress", "egress"]),
            peers,
            st.sampled_from(["TCP", "UDP", "SCTP"]),
            st.integers(1, 65535),
        ),
        st.builds(  # an ICMP type is 0 to 255 (a flow's is read so, §D39)
            Atom,
            st.sampled_from(["ingress", "egress"]),
            peers,
            st.sampled_from(["ICMPv4", "ICMPv6"]),
            st.integers(0, 255),
        ),
    ),
    min_size=1,
    max_size=30,
)


@settings(max_examples=150, deadline=None)
@given(atoms_strategy)
def test_fast_rule_rendering_matches_the_generic_emitter_and_reads_back(atoms: list[Atom]) -> None:
    rules = rules_from_atoms(atoms)
    for rule in rules:
        assert rule_lines(rule, "prod") == rule_lines_generic(rule, "prod")
        assert rule_from_dict(rule_to_dict(rule, "prod"), rule.direction, "prod") == rule
    text = render_policy("cpg-api", "prod", SELECTOR, rules)
    assert yaml.safe_load(text) == policy_document("cpg-api", "prod", SELECTOR, rules)
    assert {a for r in rules for a in r.atoms()} == set(atoms)


def test_rule_from_dict_rejects_shapes_cpg_does_not_write() -> None:
    good = rule_to_dict(Rule("ingress", CLIENT, ports=((80, "TCP"),)), "prod")
    assert rule_from_dict(good, "ingress", "prod") is not None
    assert rule_from_dict(good, "egress", "prod") is None
    assert (
        rule_from_dict({**good, "toPorts": [{"ports": [{"port": "80"}]}]}, "ingress", "prod")
        is None
    )
    two_peers = {**good, "fromEndpoints": good["fromEndpoints"] * 2}
    assert rule_from_dict(two_peers, "ingress", "prod") is None
    assert rule_from_dict({**good, "fromEntities": ["host"]}, "ingress", "prod") is None
    assert rule_from_dict("text", "ingress", "prod") is None


def test_a_hand_edited_rule_is_never_taken_for_cpgs_nor_breaks_the_read() -> None:
    """cpg's rules are read with the policy model and written again: a rule a person edited
    into values cpg never writes (a label that is a number, an ICMP family or type Cilium
    refuses, a list where a text stands) is a person's rule, and reading it raises nothing."""
    good = rule_to_dict(Rule("ingress", CLIENT, ports=((80, "TCP"),)), "prod")
    number_label = {**good, "fromEndpoints": [{"matchLabels": {"app": 7}}]}
    icmp = rule_to_dict(Rule("ingress", CLIENT, icmps=(("IPv4", 8),)), "prod")
    odd = [
        number_label,
        {**icmp, "icmps": [{"fields": [{"family": "IPv5", "type": 8}]}]},
        {**icmp, "icmps": [{"fields": [{"family": "IPv4", "type": 300}]}]},
        {**icmp, "icmps": [{"fields": [{"family": "IPv4", "type": True}]}]},
        {**good, "toPorts": [{"ports": [{"port": ["80"], "protocol": "TCP"}]}]},
        {**good, "toPorts": [{"ports": [{"port": "80", "protocol": "TCP", "endPort": "90"}]}]},
        {**good, "fromEndpoints": [{"matchLabels": {"app": ["web"]}}]},
    ]
    for rule in odd:
        assert rule_from_dict(rule, "ingress", "prod") is None, rule
    assert rule_from_dict(icmp, "ingress", "prod") is not None


def test_describe_rule() -> None:
    rule = Rule("egress", CidrPeer("1.2.3.4/32"), ports=((53, "TCP"), (53, "UDP")))
    assert describe_rule(rule) == "TCP/53, UDP/53 to 1.2.3.4/32"


def test_emit_generic_mapping() -> None:
    assert emit({"a": {}, "b": [], "c": [{"d": 1}, "x"], "e": {"f": "8"}}) == [
        "a: {}",
        "b: []",
        "c:",
        "- d: 1",
        "- x",
        "e:",
        '  f: "8"',
    ]


def _entries(text: str) -> list[tuple[str, int | None, str]]:
    doc = yaml.safe_load(text)
    return [
        (p["port"], p.get("endPort"), p["protocol"])
        for rule in doc["spec"]["ingress"]
        for port_rule in rule["toPorts"]
        for p in port_rule["ports"]
    ]


def test_a_run_of_observed_ports_becomes_one_range_and_a_gap_stays_a_gap() -> None:
    atoms = [Atom("ingress", CLIENT, "TCP", p) for p in (8080, 8081, 8082, 8084)]
    atoms += [Atom("ingress", CLIENT, "UDP", p) for p in (9000, 9001)]  # two: no range
    text = render(atoms)
    assert _entries(text) == [
        ("8080", 8082, "TCP"),
        ("8084", None, "TCP"),
        ("9000", None, "UDP"),
        ("9001", None, "UDP"),
    ]
    assert "# TCP/8080-8082, TCP/8084, UDP/9000, UDP/9001 from" in text
    assert_crd_valid(text, required=True)
    # the fast renderer and the generic emitter agree
    (rule, *_) = rules_from_atoms(atoms)
    assert rule_lines(rule, "prod") == rule_lines_generic(rule, "prod")


def test_80_consecutive_ports_are_one_entry_and_a_short_comment() -> None:
    atoms = [Atom("ingress", CLIENT, "TCP", 8080 + i) for i in range(80)]
    text = render(atoms)
    assert _entries(text) == [("8080", 8159, "TCP")]
    comment = next(line for line in text.splitlines() if line.strip().startswith("#"))
    assert "TCP/8080-8159 from" in comment and len(comment) < 120
    assert_crd_valid(text, required=True)


def test_the_40_entry_limit_counts_entries_not_ports() -> None:
    # 41 runs of three ports with gaps between them: 123 ports, 41 entries → 40 + 1
    atoms = [
        Atom("ingress", CLIENT, "TCP", 1000 + 4 * run + k) for run in range(41) for k in range(3)
    ]
    (rule,) = rules_from_atoms(atoms)
    data = rule_to_dict(rule, "prod")
    assert [len(pr["ports"]) for pr in data["toPorts"]] == [40, 1]
    assert all("endPort" in p for pr in data["toPorts"] for p in pr["ports"])
    assert_crd_valid(render(atoms), required=True)


def test_a_range_reads_back_as_its_ports() -> None:
    atoms = [Atom("ingress", CLIENT, "TCP", p) for p in (8080, 8081, 8082, 8084)]
    (rule,) = rules_from_atoms(atoms)
    assert rule_from_dict(rule_to_dict(rule, "prod"), "ingress", "prod") == rule
    # a range with a gap is not what cpg writes: left to whoever wrote it
    edited = rule_to_dict(rule, "prod")
    edited["toPorts"][0]["ports"][0]["endPort"] = 8083
    assert rule_from_dict(edited, "ingress", "prod") is None
