from __future__ import annotations

import copy
import random

import yaml
from hypothesis import given, settings, strategies as st

from cpg_core._base.rules import Atom, CidrPeer, EndpointPeer, EntityPeer, rules_from_atoms
from cpg_core._policy.equivalence import policies_equivalent, specs_equivalent
from cpg_core._synthesis.render import policy_document, render_policy

PEERS = [
    EndpointPeer("prod", (("app", "a"),)),
    EndpointPeer("x", (("app", "b"),)),
    CidrPeer("1.2.3.4/32"),
    EntityPeer("host"),
]
atoms = st.lists(
    st.builds(
        Atom,
        st.sampled_from(["ingress", "egress"]),
        st.sampled_from(PEERS),
        st.sampled_from(["TCP", "UDP", "ICMPv4"]),
        st.integers(1, 100),
    ),
    min_size=1,
    max_size=20,
)


def doc(chosen: list[Atom]) -> dict[str, object]:
    return policy_document("cpg-api", "prod", (("app", "api"),), rules_from_atoms(chosen))


@settings(max_examples=100, deadline=None)
@given(atoms, st.integers(0, 1000))
def test_shuffled_rules_and_ports_are_equivalent(chosen: list[Atom], seed: int) -> None:
    original = doc(chosen)
    shuffled = copy.deepcopy(original)
    rng = random.Random(seed)
    for direction in ("ingress", "egress"):
        rules = shuffled["spec"].get(direction, [])  # type: ignore[index, union-attr]
        rng.shuffle(rules)
        for rule in rules:
            for port_rule in rule.get("toPorts", []):
                rng.shuffle(port_rule["ports"])
    shuffled["metadata"] = {"name": "renamed"}
    assert policies_equivalent(original, shuffled)


def test_a_different_port_is_not_equivalent() -> None:
    a = doc([Atom("ingress", PEERS[0], "TCP", 80)])
    b = doc([Atom("ingress", PEERS[0], "TCP", 81)])
    c = doc([Atom("ingress", PEERS[0], "UDP", 80)])
    d = doc([Atom("egress", PEERS[0], "TCP", 80)])
    assert not policies_equivalent(a, b)
    assert not policies_equivalent(a, c)
    assert not policies_equivalent(a, d)


def test_rendered_text_reads_back_equivalent_and_selector_matters() -> None:
    chosen = [Atom("ingress", PEERS[0], "TCP", 80), Atom("egress", PEERS[2], "ICMPv4", 8)]
    text = render_policy("cpg-api", "prod", (("app", "api"),), rules_from_atoms(chosen))
    assert policies_equivalent(yaml.safe_load(text), doc(chosen))
    other = policy_document("cpg-api", "prod", (("app", "other"),), rules_from_atoms(chosen))
    assert not policies_equivalent(other, doc(chosen))
    assert specs_equivalent(None, {})


def test_the_specs_list_counts_as_much_as_the_spec() -> None:
    """A policy in the cluster with a ``specs`` entry the file lacks allows more: not the
    same policy (the file is written, not taken as already in the cluster); the same spec
    written under ``specs`` instead is the same policy."""
    chosen = [Atom("ingress", PEERS[0], "TCP", 80)]
    written = doc(chosen)
    extra = {"endpointSelector": {}, "egress": [{"toEntities": ["world"]}]}
    assert not policies_equivalent(written, {**written, "specs": [extra]})
    moved = {k: v for k, v in written.items() if k != "spec"}
    assert policies_equivalent(written, {**moved, "specs": [written["spec"]]})
    assert policies_equivalent({**written, "specs": [extra]}, {**written, "specs": [extra, extra]})
