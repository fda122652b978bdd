from __future__ import annotations

import random

import pytest
import yaml

from conftest import assert_crd_valid
from cpg_core._base.errors import PolicyMergeError, SelectorMismatchError
from cpg_core._base.rules import (
    Atom,
    CidrPeer,
    EndpointPeer,
    EntityPeer,
    FqdnPeer,
    rules_from_atoms,
)
from cpg_core._synthesis.merge import covered_by, merge_policy_text, render_or_merge
from cpg_core._synthesis.render import render_policy

NS = "prod"
SEL = (("app", "api"),)
CLIENT = EndpointPeer("default", (("app", "client"),))
A = [Atom("ingress", CLIENT, "TCP", 80)]
B = [
    Atom("ingress", CLIENT, "TCP", 443),
    Atom("egress", CidrPeer("8.8.8.8/32"), "UDP", 53),
    Atom("ingress", EntityPeer("host"), "TCP", 9090),
]


def render(atoms: list[Atom]) -> str:
    return render_policy("cpg-api", NS, SEL, rules_from_atoms(atoms))


def merge(existing: str, atoms: list[Atom]) -> str:
    return merge_policy_text(
        existing, name="cpg-api", namespace=NS, selector=SEL, rules=rules_from_atoms(atoms)
    )


def test_merging_in_two_runs_equals_one_run() -> None:
    assert merge(render(A), B) == render(A + B)
    assert merge(render(B), A) == render(A + B)


def test_nothing_new_returns_the_existing_text_unchanged() -> None:
    existing = render(A + B)
    assert merge(existing, A) is existing


def test_render_or_merge_renders_fresh_files() -> None:
    assert render_or_merge(
        None, name="cpg-api", namespace=NS, selector=SEL, rules=rules_from_atoms(A)
    ) == render(A)


HUMAN_RULE = (
    "  # reviewed by alice: the scraper\n"
    "  - fromEntities:\n"
    "    - cluster\n"
    "    toPorts:\n"
    "    - ports:\n"
    '      - port: "9100"\n'
    "        protocol: TCP\n"
)


def with_human_edits(text: str) -> str:
    text = text.replace("metadata:\n", "# owned by team-api\nmetadata:\n")
    text = text.replace("  labels:\n", "  labels:\n    team: api\n")
    text = text.replace("  ingress:\n", "  ingress:\n" + HUMAN_RULE)
    return text.replace("  # TCP/80 from", "  # approved in CHG-1234\n  # TCP/80 from")


def test_human_rules_and_comments_survive_a_merge() -> None:
    edited = with_human_edits(render(A))
    merged = merge(edited, B)
    for kept in (
        "# owned by team-api\n",
        "    team: api\n",
        HUMAN_RULE,
        "  # approved in CHG-1234\n",
    ):
        assert kept in merged
    # the human comment stays attached to the rule it annotated
    assert "  # approved in CHG-1234\n  # TCP/80, TCP/443 from default/app=client\n" in merged
    data = yaml.safe_load(merged)
    assert data["metadata"]["labels"] == {"team": "api", "app.kubernetes.io/managed-by": "cpg"}
    assert len(data["spec"]["ingress"]) == 3 and len(data["spec"]["egress"]) == 1
    assert_crd_valid(merged)
    # and merging the same flows again changes nothing
    assert merge(merged, A + B) is merged


def test_an_edited_rule_becomes_the_humans_and_is_not_duplicated() -> None:
    text = render([Atom("ingress", CLIENT, "TCP", 80), Atom("ingress", CLIENT, "TCP", 443)])
    # The reviewer removes 443 but keeps cpg's comment: the rule no longer matches its comment.
    edited = text.replace('      - port: "443"\n        protocol: TCP\n', "")
    merged = merge(edited, [Atom("ingress", CLIENT, "TCP", 80)])
    # port 80 is already allowed by the edited rule; only cpg's comment is made true again
    assert merged == edited.replace("# TCP/80, TCP/443 from", "# TCP/80 from")
    merged = merge(edited, [Atom("ingress", CLIENT, "TCP", 8080)])
    rules = yaml.safe_load(merged)["spec"]["ingress"]
    assert len(rules) == 2
    assert rules[0]["toPorts"][0]["ports"] == [{"port": "80", "protocol": "TCP"}]
    assert rules[1]["toPorts"][0]["ports"] == [{"port": "8080", "protocol": "TCP"}]


def test_new_section_is_added_in_order() -> None:
    egress_only = render([Atom("egress", CidrPeer("8.8.8.8/32"), "UDP", 53)])
    assert merge(egress_only, A) == render([*A, Atom("egress", CidrPeer("8.8.8.8/32"), "UDP", 53)])
    ingress_only = render(A)
    assert merge(ingress_only, [Atom("egress", CidrPeer("8.8.8.8/32"), "UDP", 53)]) == render(
        [*A, Atom("egress", CidrPeer("8.8.8.8/32"), "UDP", 53)]
    )


def test_items_indented_under_their_key_are_understood() -> None:
    indented = (
        "apiVersion: cilium.io/v2\n"
        "kind: CiliumNetworkPolicy\n"
        "metadata:\n"
        "    name: cpg-api\n"
        "    namespace: prod\n"
        "spec:\n"
        "  endpointSelector:\n"
        "    matchLabels:\n"
        "      app: api\n"
        "  ingress:\n"
        "    - fromEndpoints:\n"
        "        - matchLabels:\n"
        "            app: client\n"
        "            io.kubernetes.pod.namespace: default\n"
        "      toPorts:\n"
        "        - ports:\n"
        "            - port: '80'\n"
        "              protocol: TCP\n"
    )
    merged = merge(indented, B)
    assert merged.startswith(indented.split("  ingress:")[0])
    data = yaml.safe_load(merged)
    # the human-formatted rule stays as written; host and client:443 are added
    assert len(data["spec"]["ingress"]) == 3
    assert data["spec"]["ingress"][0]["toPorts"][0]["ports"] == [{"port": "80", "protocol": "TCP"}]
    assert merge(merged, A + B) is merged
    assert_crd_valid(merged)


def test_selector_mismatch_is_refused() -> None:
    other = render_policy("cpg-api", NS, (("app", "other"),), rules_from_atoms(A))
    with pytest.raises(SelectorMismatchError):
        merge(other, B)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("a: [unclosed\n", "not valid YAML"),
        ("kind: ConfigMap\nspec: {}\n", "not a CiliumNetworkPolicy"),
        (
            "kind: CiliumNetworkPolicy\nspec: {}\n---\nkind: CiliumNetworkPolicy\nspec: {}\n",
            "exactly one",
        ),
        (
            "kind: CiliumNetworkPolicy\nspec: {endpointSelector: {matchLabels: {app: api}}, ingress: [{}]}\n",
            "block style",
        ),
    ],
)
def test_files_cpg_cannot_edit_safely_are_refused_with_a_reason(text: str, message: str) -> None:
    with pytest.raises(PolicyMergeError, match=message):
        merge(text, B)


def test_coverage_by_human_rules() -> None:
    atom = Atom("ingress", CLIENT, "TCP", 443)
    selector = {"matchLabels": {"app": "client", "io.kubernetes.pod.namespace": "default"}}
    assert covered_by(atom, [{"fromEndpoints": [selector]}], NS)  # L3-only rule
    assert covered_by(
        atom,
        [{"fromEndpoints": [selector], "toPorts": [{"ports": [{"port": "400", "endPort": 500}]}]}],
        NS,
    )
    assert covered_by(
        atom,
        [
            {
                "fromEndpoints": [selector],
                "toPorts": [{"ports": [{"port": "443", "protocol": "ANY"}]}],
            }
        ],
        NS,
    )
    assert not covered_by(
        atom,
        [
            {
                "fromEndpoints": [selector],
                "toPorts": [{"ports": [{"port": "443", "protocol": "UDP"}]}],
            }
        ],
        NS,
    )
    # An L7-restricted port does not allow everything on it.
    assert not covered_by(
        atom,
        [
            {
                "fromEndpoints": [selector],
                "toPorts": [{"ports": [{"port": "443"}], "rules": {"http": [{}]}}],
            }
        ],
        NS,
    )
    assert not covered_by(atom, [{"fromEndpoints": [{"matchLabels": {"app": "client"}}]}], NS)
    assert covered_by(
        Atom("egress", CidrPeer("1.2.3.4/32"), "ICMPv4", 8),
        [{"toCIDR": ["1.2.3.4/32"], "icmps": [{"fields": [{"type": 8}]}]}],
        NS,
    )


def test_rules_cpg_added_to_an_indented_list_stay_managed() -> None:
    text = render(A).replace("  ingress:\n", "  ingress:\n")
    indented = (
        "\n".join(
            ("  " + line)
            if line.startswith("  ") and not line.startswith("  ingress:") and i > 11
            else line
            for i, line in enumerate(text.splitlines())
        )
        + "\n"
    )
    assert yaml.safe_load(indented) == yaml.safe_load(text)
    once = merge(indented, B[:1])
    twice = merge(once, [Atom("ingress", CLIENT, "TCP", 8080)])
    ports = yaml.safe_load(twice)["spec"]["ingress"][0]["toPorts"][0]["ports"]
    assert [p["port"] for p in ports] == ["80", "443", "8080"]
    assert "    # TCP/80, TCP/443, TCP/8080 from default/app=client\n" in twice


def _port_entries(text: str) -> list[tuple[str, int | None]]:
    return [
        (p["port"], p.get("endPort"))
        for rule in yaml.safe_load(text)["spec"]["ingress"]
        for port_rule in rule["toPorts"]
        for p in port_rule["ports"]
    ]


def test_a_new_port_that_extends_a_range_merges_into_it() -> None:
    first = render([Atom("ingress", CLIENT, "TCP", p) for p in (8080, 8081, 8082, 8084)])
    assert _port_entries(first) == [("8080", 8082), ("8084", None)]
    merged = merge(first, [Atom("ingress", CLIENT, "TCP", 8083)])
    assert _port_entries(merged) == [("8080", 8084)], "the gap filled: one range"
    assert "TCP/8080-8084" in merged
    assert_crd_valid(merged, required=True)
    # a port inside a range is already allowed: nothing changes
    assert merge(merged, [Atom("ingress", CLIENT, "TCP", 8082)]) == merged


def test_a_human_range_covers_new_ports_and_is_kept() -> None:
    human = render([Atom("ingress", CLIENT, "TCP", 443)]).replace(
        '      - port: "443"\n', '      - port: "30000"\n        endPort: 32767\n'
    )
    assert _port_entries(human) == [("30000", 32767)]
    corrected = human.replace("# TCP/443 from", "# TCP/30000-32767 from")
    assert merge(human, [Atom("ingress", CLIENT, "TCP", 31000)]) == corrected
    assert merge(corrected, [Atom("ingress", CLIENT, "TCP", 31000)]) is corrected


def test_cpgs_comment_on_an_edited_rule_is_made_true_or_dropped() -> None:
    two_ports = [Atom("ingress", CLIENT, "TCP", 80), Atom("ingress", CLIENT, "TCP", 443)]
    original = render(two_ports)
    assert "  # TCP/80, TCP/443 from default/app=client\n" in original
    # the rule still has cpg's shape: the comment says what it now admits
    edited = original.replace('port: "443"', 'port: "8443"')
    merged = merge(edited, two_ports)
    assert "  # TCP/80, TCP/8443 from default/app=client\n" in merged
    assert merged.count("# TCP/80, TCP/443") == 0
    assert "  # TCP/443 from default/app=client\n" in merged  # cpg's rule, back with its own
    assert merge(merged, two_ports) == merged  # settled: the next run changes nothing
    # a shape cpg does not write (ports out of order): the comment goes, nothing replaces it
    reordered = original.replace('port: "80"', 'port: "9999"')
    merged = merge(reordered, two_ports)
    assert "TCP/80, TCP/443" not in merged and "9999" in merged
    # a person's own comment above a rule is theirs
    own = original.replace("  # TCP/80, TCP/443 from default/app=client", "  # ask Ann first")
    assert "  # ask Ann first\n" in merge(own, [*two_ports, Atom("ingress", CLIENT, "TCP", 22)])
    # a correct comment on an unchanged file: the file is left as it was
    assert merge(original, two_ports) is original


def _random_atoms(rng: random.Random) -> list[Atom]:
    """A policy's worth of allow entries of every kind cpg writes."""
    peers = [
        CLIENT,
        EndpointPeer(NS, (("app", "web"), ("tier", "front"))),
        EndpointPeer("shop", (("app", "cart"),), cluster="east"),
        EntityPeer("host"),
        EntityPeer("world"),
        CidrPeer("10.0.0.7/32"),
        CidrPeer("2001:db8::1/128"),
    ]
    atoms = []
    for _ in range(rng.randint(1, 12)):
        direction = rng.choice(("ingress", "egress"))
        roll = rng.random()
        if roll < 0.1:
            atoms.append(Atom(direction, rng.choice(peers), "ICMPv4", rng.choice((0, 8))))
        elif roll < 0.2:
            path = rng.choice(("^/api$", "^/health$"))
            atoms.append(Atom(direction, CLIENT, "TCP", 8080, ("http", "GET", path)))
        elif roll < 0.3:
            dns = EndpointPeer("kube-system", (("k8s-app", "kube-dns"),))
            name = rng.choice(("example.com", "api.example.org"))
            atoms.append(Atom("egress", dns, rng.choice(("UDP", "TCP")), 53, ("dns", name)))
        elif roll < 0.4:
            fqdn = FqdnPeer(rng.choice(("example.com", "api.example.org")))
            atoms.append(Atom("egress", fqdn, "TCP", rng.choice((443, 8443))))
        else:
            port = rng.choice((53, 80, 443, 5432, 9090))
            atoms.append(Atom(direction, rng.choice(peers), rng.choice(("TCP", "UDP")), port))
    return atoms


def test_a_file_that_is_its_own_rendering_merges_to_itself() -> None:
    """What render_or_merge relies on to keep such a file without reading it as YAML: merging
    rules into their own rendering changes nothing, for every kind of rule."""
    rng = random.Random(11)
    for _ in range(300):
        rules = rules_from_atoms(_random_atoms(rng))
        text = render_policy("cpg-api", NS, SEL, rules)
        merged = merge_policy_text(text, name="cpg-api", namespace=NS, selector=SEL, rules=rules)
        assert merged == text
        kept = render_or_merge(text, name="cpg-api", namespace=NS, selector=SEL, rules=rules)
        assert kept == text


def test_render_or_merge_merges_a_file_that_differs_from_the_fresh_rendering() -> None:
    rules = rules_from_atoms(B)
    assert render_or_merge(render(A), name="cpg-api", namespace=NS, selector=SEL, rules=rules) == (
        render(A + B)
    )
    edited = with_human_edits(render(A + B))
    again = render_or_merge(edited, name="cpg-api", namespace=NS, selector=SEL, rules=rules)
    assert again is edited  # nothing new: the person's file as it was


def test_a_rendering_this_process_wrote_merges_as_a_file_read_from_disk() -> None:
    """render_or_merge keeps what it rendered (a live flush's last write) and merges new
    rules into it without reading it as YAML: the same bytes as merging the file read."""
    from cpg_core._synthesis import merge as _merge

    rng = random.Random(7)
    for _ in range(200):
        first, second = _random_atoms(rng), _random_atoms(rng)
        written = render_or_merge(
            None, name="cpg-api", namespace=NS, selector=SEL, rules=rules_from_atoms(first)
        )
        remembered = render_or_merge(
            written, name="cpg-api", namespace=NS, selector=SEL, rules=rules_from_atoms(second)
        )
        _merge._RENDERED.clear()
        read = render_or_merge(
            written, name="cpg-api", namespace=NS, selector=SEL, rules=rules_from_atoms(second)
        )
        assert remembered == read
    # a file a person changed is never taken for a rendering: their work stays
    render_or_merge(None, name="cpg-api", namespace=NS, selector=SEL, rules=rules_from_atoms(A))
    edited = with_human_edits(render(A))
    merged = render_or_merge(
        edited, name="cpg-api", namespace=NS, selector=SEL, rules=rules_from_atoms(B)
    )
    assert "# owned by team-api\n" in merged and "    team: api\n" in merged


def test_only_a_parsed_label_makes_a_file_cpgs() -> None:
    """Issue 67: text that quotes cpg's mark (a comment, an annotation, a block scalar) is a
    person's file; a duplicate metadata after the spec decides as YAML decides."""
    from cpg_core.cilium import foreign_policy

    cpgs = (
        "apiVersion: cilium.io/v2\nkind: CiliumNetworkPolicy\nmetadata:\n  name: cpg-a\n"
        "  namespace: shop\n  labels:\n    app.kubernetes.io/managed-by: cpg\nspec:\n"
        "  endpointSelector: {}\n"
    )
    assert foreign_policy(cpgs) is None
    quoted = cpgs.replace("  labels:\n    app.kubernetes.io/managed-by: cpg\n", "")
    for mention in (
        "# app.kubernetes.io/managed-by: cpg\n",
        "",
    ):
        text = mention + quoted.replace(
            "  namespace: shop\n",
            "  namespace: shop\n  annotations:\n    note: |\n      labels:\n"
            "        app.kubernetes.io/managed-by: cpg\n",
        )
        found = foreign_policy(text)
        assert found is not None and found.describe() == "CiliumNetworkPolicy cpg-a", text
    later = cpgs + "metadata:\n  name: mine\n  namespace: shop\n"
    found = foreign_policy(later)
    assert found is not None and found.describe() == "CiliumNetworkPolicy mine"
    two = cpgs + "---\n" + quoted.replace("cpg-a", "b")
    assert foreign_policy(two) is None  # one of its documents is cpg's, as before
