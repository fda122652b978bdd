"""The one matcher against Cilium's own verdicts.

The vectors under ``../shared/semantics`` are the answers of Cilium's policy code (its CRD
validator, ``Parse``, the policy repository and the endpoint lookup) to flows on folders of
policies: every one must hold here, for both ``allow-localhost`` settings and both
enforcement modes. cpg's own cases below cover each construct the matcher reads, with the
expected answer taken from Cilium's documented behaviour and code (said in each docstring).
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
import yaml

from conftest import SHARED
from cpg_core._base.flow import Direction, Flow
from cpg_core._policy.matcher import judge_flow, selecting_specs
from cpg_core._policy.policy_set import PolicySet
from cpg_core._review.why import explain_denial, traced_endpoint, traced_flows
from cpg_core.cilium import AgentSettings, load_all, policies_in

SETS = ("semantics", "semantics-2", "semantics-3")
"""The first set (the constructs cpg writes and reads most), the second (default-deny per
direction, negative namespace selectors, port strings, IPv6, more entities, host policies)
and the third (Kubernetes NetworkPolicy, host policies under the host firewall, dual-stack
agents, reserved identities with two names)."""
DUAL_STACK = ("cases-dual-stack.jsonl", "policies-dual-stack")
"""The third set's rows asked of a dual-stack agent, and their folders."""
REQUIRED = os.environ.get("CPG_REQUIRE_SHARED") == "1"  # set by .ci/run: never skip there


def _vectors(name: str, folders: str = "policies") -> list[dict[str, Any]]:
    """Every vector of the sets that have ``name``, each marked with the set it came from
    and the folder its policies are in."""
    vectors: list[dict[str, Any]] = []
    for vector_set in SETS:
        path = SHARED / vector_set / name
        if not path.exists():
            if REQUIRED and name != DUAL_STACK[0]:
                raise AssertionError(f"{path} is missing, and CPG_REQUIRE_SHARED=1")
            if REQUIRED and vector_set == "semantics-3":
                raise AssertionError(f"{path} is missing, and CPG_REQUIRE_SHARED=1")
            continue
        for line in path.read_text().splitlines():
            if line.strip():
                vectors.append({**json.loads(line), "set": vector_set, "folders": folders})
    return vectors


def _folder(vector_set: str, name: str, folders: str = "policies") -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted((SHARED / vector_set / folders / name).glob("*.yaml")):
        for document in load_all(path.read_text(), str(path)):
            docs += policies_in(document)
    return docs


def traced(source: str, destination: str, direction: str, port: int, protocol: str) -> Flow:
    src, src_ip = traced_endpoint(source, "from")
    dst, dst_ip = traced_endpoint(destination, "to")
    return Flow(
        direction=int(Direction.INGRESS if direction == "ingress" else Direction.EGRESS),
        source=src,
        destination=dst,
        source_ip=src_ip,
        destination_ip=dst_ip,
        protocol=protocol,
        port=port,
    )


def agent_of(case: dict[str, Any], localhost: bool) -> AgentSettings:
    """The agent a row was asked of: allow-localhost, and the settings it records (the host
    firewall, dual stack; Kubernetes NetworkPolicy is on in every agent)."""
    given = case.get("agent") or {}
    return AgentSettings(
        allow_localhost=localhost,
        host_firewall=bool(given.get("enable-host-firewall")),
        dual_stack=bool(given.get("dual-stack")),
    )


def answers(
    policies: list[dict[str, Any]], flow: Flow, localhost: bool, agent: AgentSettings | None = None
) -> dict[str, Any]:
    """cpg's answers, spelled as Cilium's vectors spell them: what ``cpg trace`` says (the
    default mode), whether a policy polices the subject, and the verdict with every endpoint
    in default-deny."""
    agent = agent or AgentSettings(allow_localhost=localhost)
    why = explain_denial(flow, policies, agent=agent)
    judged = judge_flow(policies, flow, agent=agent)
    assert why.allowed == judged.allowed  # trace and the matcher are one answer
    indexed = PolicySet(policies)  # the index the review commands judge through: the same
    assert judge_flow(indexed, flow, agent=agent) == judged
    assert explain_denial(flow, indexed, agent=agent) == why
    firewall = agent.host_firewall
    for end in (flow.source, flow.destination):
        assert selecting_specs(indexed, end, host_firewall=firewall) == selecting_specs(
            policies, end, host_firewall=firewall
        )
    return {
        "decision_default_mode": "allowed" if why.allowed else "denied",
        "policed_default_mode": bool(why.policed_by),
        "decision_enforced": "allowed" if judged.allowed_enforced else "denied",
    }


CASES = _vectors("cases.jsonl") + _vectors(*DUAL_STACK)


@pytest.mark.skipif(not CASES, reason="../shared/semantics is absent")
@pytest.mark.parametrize(
    "case", CASES, ids=[f"{c['set']}:{c['case']}-{c['direction']}" for c in CASES] or None
)
@pytest.mark.parametrize("setting", ["always", "policy"])
def test_cpg_answers_as_cilium_does(case: dict[str, Any], setting: str) -> None:
    flow = traced(case["from"], case["to"], case["direction"], case["port"], case["protocol"])
    # what `cpg trace --from … --to … --port PORT/PROTO` asks at the row's end is this flow
    asked = traced_flows(case["from"], case["to"], f"{case['port']}/{case['protocol']}")
    assert [f for f in asked if f.direction == flow.direction] == [flow]
    localhost = setting == "always"
    policies = _folder(case["set"], case["policies"], case["folders"])
    got = answers(policies, flow, localhost, agent_of(case, localhost))
    assert got == case["cilium"][setting], case["note"] or case["construct"]


def test_the_vectors_cover_every_folder() -> None:
    """Every policy folder of the vectors is asked about (so a folder nobody reads is a
    mistake in the vectors, not a silent pass)."""
    if not CASES:
        pytest.skip("../shared/semantics is absent")
    for vector_set, kind, least in (
        ("semantics", "policies", 147),
        ("semantics-2", "policies", 189),
        ("semantics-3", "policies", 136),
        ("semantics-3", DUAL_STACK[1], 16),
    ):
        folders = {p.name for p in (SHARED / vector_set / kind).iterdir() if p.is_dir()}
        asked = [c for c in CASES if c["set"] == vector_set and c["folders"] == kind]
        assert folders == {c["policies"] for c in asked}
        assert len(asked) >= least


LINT = _vectors("lint.jsonl")


@pytest.mark.skipif(not LINT, reason="../shared/semantics is absent")
@pytest.mark.parametrize("vector", LINT, ids=[f"{v['set']}:{v['file']}" for v in LINT] or None)
def test_lint_errs_exactly_when_cilium_refuses(vector: dict[str, Any]) -> None:
    """``cpg lint`` has an error for a document Cilium refuses and none for one it
    accepts (a warning is allowed: a ``bad-`` file Cilium accepts is a mutation it
    tolerates)."""
    from cpg_core.lint import lint_text
    from cpg_io.crd_schema import crd_schema_errors

    path = SHARED / vector["set"] / "lint" / vector["file"]
    findings = lint_text(path.read_text(), str(path), schema=crd_schema_errors)
    errors = [f"{f.code} {f.message}" for f in findings if f.level == "error"]
    if vector["cilium"] == "rejected":
        assert errors, f"Cilium refuses it: {vector['why']}"
    else:
        assert errors == []


# cpg's own cases: (policy YAML, from, to, direction, port/protocol, expected) where expected
# is (decision in the default mode, policed, decision with every endpoint in default-deny).


def _policy(spec: dict[str, Any], *, kind: str = "CiliumNetworkPolicy", ns: str = "shop") -> Any:
    meta: dict[str, Any] = {"name": "p"}
    if kind == "CiliumNetworkPolicy" and ns:
        meta["namespace"] = ns
    return {"apiVersion": "cilium.io/v2", "kind": kind, "metadata": meta, "spec": spec}


API = {"matchLabels": {"app": "api"}}


def _own(
    spec: dict[str, Any],
    source: str,
    destination: str,
    direction: str,
    port: str,
    *,
    kind: str = "CiliumNetworkPolicy",
    localhost: bool = True,
    ns: str = "shop",
) -> tuple[str, bool, str]:
    number, _, protocol = port.partition("/")
    flow = traced(source, destination, direction, int(number), protocol or "TCP")
    got = answers([_policy(spec, kind=kind, ns=ns)], flow, localhost)
    return got["decision_default_mode"], got["policed_default_mode"], got["decision_enforced"]


def test_an_empty_rule_selects_no_peer() -> None:
    """``egress: [{}]`` is Cilium's documented default-deny: the rule puts the endpoint into
    default-deny and selects nothing (Kubernetes NetworkPolicy reads ``[{}]`` as allow-all;
    Cilium's rule resolution skips a rule with neither L3 nor L4)."""
    spec = {"endpointSelector": API, "egress": [{}]}
    for peer in ("shop:app=db@default", "world", "8.8.8.8", "kube-apiserver"):
        assert _own(spec, "shop:app=api@default", peer, "egress", "443/TCP") == (
            "denied",
            True,
            "denied",
        )


def test_ports_without_a_peer_select_every_peer() -> None:
    """An L4-only rule allows the ports to any layer-3 peer (Cilium's "Layer 4 examples"):
    the world, pods of any namespace, the host."""
    spec = {"endpointSelector": API, "egress": [{"toPorts": [{"ports": [{"port": "443"}]}]}]}
    for peer in ("world", "8.8.8.8", "other:app=x@default", "host"):
        assert _own(spec, "shop:app=api@default", peer, "egress", "443/TCP")[0] == "allowed"
    assert _own(spec, "shop:app=api@default", "world", "egress", "80/TCP")[0] == "denied"
    icmp = {"endpointSelector": API, "egress": [{"icmps": [{"fields": [{"type": 8}]}]}]}
    assert _own(icmp, "shop:app=api@default", "8.8.8.8", "egress", "8/ICMPv4")[0] == "allowed"


def test_the_cluster_entities_split_the_mesh() -> None:
    """``cluster`` is the local cluster (Cilium's InitEntities: the reserved identities and
    the pods labelled with the local cluster's name); ``cluster-mesh`` is the pods of the
    other clusters (the identities Cilium aggregates apart from the local ones); ``all``
    is both and the world."""
    cluster = {"endpointSelector": API, "ingress": [{"fromEntities": ["cluster"]}]}
    mesh = {"endpointSelector": API, "ingress": [{"fromEntities": ["cluster-mesh"]}]}
    every = {"endpointSelector": API, "ingress": [{"fromEntities": ["all"]}]}
    api = "shop:app=api@default"
    assert _own(cluster, "shop:app=web@west", api, "ingress", "80")[0] == "denied"
    assert _own(cluster, "shop:app=web@default", api, "ingress", "80")[0] == "allowed"
    assert _own(cluster, "remote-node", api, "ingress", "80")[0] == "allowed"
    assert _own(cluster, "8.8.8.8", api, "ingress", "80")[0] == "denied"
    assert _own(mesh, "shop:app=web@west", api, "ingress", "80")[0] == "allowed"
    assert _own(mesh, "shop:app=web@default", api, "ingress", "80")[0] == "denied"
    assert _own(mesh, "remote-node", api, "ingress", "80")[0] == "denied"
    for peer in ("shop:app=web@west", "8.8.8.8", "remote-node"):
        assert _own(every, peer, api, "ingress", "80")[0] == "allowed"


def test_a_clusterwide_selector_selects_pods_only() -> None:
    """A clusterwide policy's peer selector gets "has a namespace" added (Cilium's
    getEndpointSelector), so ``{}`` and ``app: web`` never select the host or a node."""
    spec = {
        "endpointSelector": API,
        "ingress": [{"fromEndpoints": [{}]}, {"fromEndpoints": [{"matchLabels": {"app": "web"}}]}],
    }
    ccnp = "CiliumClusterwideNetworkPolicy"
    api = "shop:app=api@default"
    assert _own(spec, "other:app=x@default", api, "ingress", "80", kind=ccnp)[0] == "allowed"
    for node in ("host", "remote-node", "kube-apiserver", "8.8.8.8"):
        got = _own(spec, node, api, "ingress", "80", kind=ccnp, localhost=False)
        assert got[0] == "denied", node


def test_reserved_keys_select_cilium_identities_in_any_policy() -> None:
    """A selector on a ``reserved:`` key is left as written: no namespace is added."""
    spec = {
        "endpointSelector": API,
        "ingress": [{"fromEndpoints": [{"matchLabels": {"reserved:remote-node": ""}}]}],
    }
    api = "shop:app=api@default"
    assert _own(spec, "remote-node", api, "ingress", "80")[0] == "allowed"
    assert _own(spec, "host", api, "ingress", "80", localhost=False)[0] == "denied"


def test_namespace_label_keys_span_namespaces() -> None:
    """A selector keyed on the namespace's labels (``k8s:`` or ``any:``) gets no policy
    namespace added; an ``any:`` key on a pod label still does."""
    spec = {
        "endpointSelector": API,
        "ingress": [
            {
                "fromEndpoints": [
                    {"matchLabels": {"any:io.cilium.k8s.namespace.labels.env": "prod"}}
                ]
            },
            {
                "fromEndpoints": [{"matchLabels": {"any:app": "web"}}],
                "toPorts": [{"ports": [{"port": "81"}]}],
            },
        ],
    }
    api = "shop:app=api@default"
    prod = "payments:app=q,io.cilium.k8s.namespace.labels.env=prod@default"
    assert _own(spec, prod, api, "ingress", "80")[0] == "allowed"
    assert _own(spec, "payments:app=q@default", api, "ingress", "80")[0] == "denied"
    assert _own(spec, "shop:app=web@default", api, "ingress", "81")[0] == "allowed"
    assert _own(spec, "other:app=web@default", api, "ingress", "81")[0] == "denied"


def test_icmp_types_by_name_in_their_family() -> None:
    """Cilium reads an ICMP type name in its family: EchoRequest is 8 in IPv4 (the default
    family) and 128 in IPv6."""
    spec = {
        "endpointSelector": API,
        "ingress": [
            {
                "fromEntities": ["world"],
                "icmps": [
                    {"fields": [{"type": "EchoRequest"}, {"type": "EchoRequest", "family": "IPv6"}]}
                ],
            }
        ],
    }
    api = "shop:app=api@default"
    assert _own(spec, "8.8.8.8", api, "ingress", "8/ICMPv4")[0] == "allowed"
    assert _own(spec, "8.8.8.8", api, "ingress", "128/ICMPv6")[0] == "allowed"
    assert _own(spec, "8.8.8.8", api, "ingress", "128/ICMPv4")[0] == "denied"
    assert _own(spec, "8.8.8.8", api, "ingress", "8/ICMPv6")[0] == "denied"


def test_the_whole_address_space_selects_a_world_peer_without_an_address() -> None:
    """``0.0.0.0/0`` and ``::/0`` select Cilium's world identity itself, so a world peer whose
    address is unknown matches them, and no narrower CIDR."""
    whole = {"endpointSelector": API, "egress": [{"toCIDR": ["0.0.0.0/0"]}]}
    narrow = {"endpointSelector": API, "egress": [{"toCIDR": ["10.0.0.0/8"]}]}
    api = "shop:app=api@default"
    assert _own(whole, api, "world", "egress", "443")[0] == "allowed"
    assert _own(narrow, api, "world", "egress", "443")[0] == "denied"
    assert _own(whole, api, "shop:app=db@default", "egress", "443")[0] == "denied"


def test_an_end_port_below_the_port_is_the_single_port() -> None:
    """Cilium accepts ``endPort`` below ``port`` and reads the single port."""
    spec = {
        "endpointSelector": API,
        "ingress": [{"toPorts": [{"ports": [{"port": "8080", "endPort": 8000}]}]}],
    }
    api = "shop:app=api@default"
    assert _own(spec, "shop:app=web@default", api, "ingress", "8080")[0] == "allowed"
    assert _own(spec, "shop:app=web@default", api, "ingress", "8050")[0] == "denied"


def test_any_is_tcp_udp_and_sctp_never_icmp() -> None:
    spec = {
        "endpointSelector": API,
        "ingress": [{"toPorts": [{"ports": [{"port": "0", "protocol": "ANY"}]}]}],
    }
    api = "shop:app=api@default"
    for port in ("5/TCP", "5/UDP", "5/SCTP"):
        assert _own(spec, "shop:app=web@default", api, "ingress", port)[0] == "allowed"
    assert _own(spec, "shop:app=web@default", api, "ingress", "8/ICMPv4")[0] == "denied"


def test_deny_wins_across_policies_and_over_default_allow() -> None:
    """A deny rule wins over any allow rule, also with default-deny turned off."""
    spec = {
        "endpointSelector": API,
        "enableDefaultDeny": {"ingress": False},
        "ingressDeny": [{"fromEntities": ["world"]}],
    }
    api = "shop:app=api@default"
    assert _own(spec, "8.8.8.8", api, "ingress", "80") == ("denied", True, "denied")
    assert _own(spec, "shop:app=web@default", api, "ingress", "80") == ("allowed", True, "denied")


def test_fqdn_wildcards_span_one_label_or_many() -> None:
    """``*`` matches DNS characters within one label; a leading ``**.`` (Cilium 1.19+) one
    or more labels; ``*`` alone every name."""
    from cpg_core._policy.matcher import fqdn_matches as matches
    from cpg_core._policy.model import read_name_match

    def fqdn_matches(names: list[str], written: list[dict[str, str]]) -> bool:
        return matches(names, [read_name_match(entry) for entry in written])

    one = [{"matchPattern": "*.example.com"}]
    many = [{"matchPattern": "**.example.com"}]
    assert fqdn_matches(["api.example.com"], one)
    assert not fqdn_matches(["a.b.example.com"], one)
    assert not fqdn_matches(["example.com"], one)
    assert fqdn_matches(["a.b.example.com."], many) and fqdn_matches(["api.example.com"], many)
    assert not fqdn_matches(["example.com"], many)
    assert fqdn_matches(["s3.eu-west-1.amazonaws.com"], [{"matchPattern": "*"}])
    assert not fqdn_matches(["notexample.com"], [{"matchPattern": "*.example.com"}])


def test_a_policy_file_without_a_namespace_is_read_in_default() -> None:
    """``kubectl apply`` puts a CiliumNetworkPolicy without a namespace into ``default``: it
    selects pods there only, and its peer selectors are scoped to it."""
    spec = {"endpointSelector": API, "ingress": [{"fromEndpoints": [{}]}]}
    got_default = _own(
        spec, "default:app=web@default", "default:app=api@default", "ingress", "80", ns=""
    )
    assert got_default == ("allowed", True, "allowed")
    assert (
        _own(spec, "shop:app=web@default", "shop:app=api@default", "ingress", "80", ns="")[1]
        is False
    )


def test_yaml_of_the_own_cases_is_what_cilium_accepts() -> None:
    """The policies of the cases above are documents Cilium accepts (so the answers are
    about policies that can exist)."""
    from cpg_core.lint import lint_text
    from cpg_io.crd_schema import crd_schema_errors

    spec = {"endpointSelector": API, "egress": [{}]}
    text = yaml.safe_dump(_policy(spec))
    assert [
        f for f in lint_text(text, "x.yaml", schema=crd_schema_errors) if f.level == "error"
    ] == []


def test_a_pod_hubble_called_world_is_not_selected_by_its_address() -> None:
    """Hubble sometimes gives a pod the world identity while naming it (an L7 record, a
    stale ipcache). Cilium enforces on the pod's real identity, and its CIDR rules never
    select a pod it manages: a ``toCIDR`` of the pod's address does not admit it, nor does
    the world entity; ``all`` does."""
    from cpg_core._base.flow import Endpoint

    api = traced_endpoint("shop:app=api@default", "from")[0]
    pod_as_world = Endpoint(labels=("reserved:world",), identity=2, namespace="db", pod_name="pg-0")
    flow = Flow(
        direction=int(Direction.EGRESS),
        source=api,
        destination=pod_as_world,
        source_ip="10.0.0.1",
        destination_ip="10.1.2.3",
        protocol="TCP",
        port=5432,
    )

    def allowed(rule: dict[str, Any]) -> bool:
        spec = {"endpointSelector": API, "egress": [rule]}
        return judge_flow([_policy(spec)], flow).allowed

    assert not allowed({"toCIDR": ["10.1.2.3/32"]})
    assert not allowed({"toEntities": ["world"]})
    assert allowed({"toEntities": ["all"]})
    plain_world = Flow(
        direction=int(Direction.EGRESS),
        source=api,
        destination=Endpoint(labels=("reserved:world",), identity=2),
        source_ip="10.0.0.1",
        destination_ip="10.1.2.3",
        protocol="TCP",
        port=5432,
    )
    spec = {"endpointSelector": API, "egress": [{"toCIDR": ["10.1.2.3/32"]}]}
    assert judge_flow([_policy(spec)], plain_world).allowed


# The five families where the second set of vectors found cpg reading a construct otherwise
# than Cilium does; each with cases of cpg's own beyond the vectors.


def test_a_negative_namespace_term_never_opens_a_selector_to_cilium_identities() -> None:
    """With policy-default-local-cluster, Cilium adds the local-cluster term to a peer
    selector whatever it says about namespaces; Cilium's own identities (world, host, nodes)
    carry no cluster label, so ``NotIn``/``DoesNotExist`` on the namespace key or on a
    namespace label keeps them out, while pods they describe stay in."""
    not_in = {"matchExpressions": [{"key": "io.kubernetes.pod.namespace", "operator": "NotIn",
                                    "values": ["shop"]}]}  # fmt: skip
    no_ns = {"matchExpressions": [{"key": "k8s:io.kubernetes.pod.namespace",
                                   "operator": "DoesNotExist"}]}  # fmt: skip
    no_env = {"matchExpressions": [{"key": "io.cilium.k8s.namespace.labels.team",
                                    "operator": "DoesNotExist"}]}  # fmt: skip
    api = "shop:app=api@default"
    for selector in (not_in, no_ns, no_env):
        spec = {"endpointSelector": API, "ingress": [{"fromEndpoints": [selector]}]}
        for identity in ("10.1.2.3", "world", "remote-node", "kube-apiserver", "health"):
            assert _own(spec, identity, api, "ingress", "80", localhost=False)[0] == "denied"
    spec = {"endpointSelector": API, "ingress": [{"fromEndpoints": [not_in]}]}
    assert _own(spec, "billing:app=x@default", api, "ingress", "80")[0] == "allowed"
    assert _own(spec, "shop:app=x@default", api, "ingress", "80")[0] == "denied"
    assert _own(spec, "billing:app=x@west", api, "ingress", "80")[0] == "denied"
    spec = {"endpointSelector": API, "ingress": [{"fromEndpoints": [no_env]}]}
    assert _own(spec, "billing:app=x@default", api, "ingress", "80")[0] == "allowed"
    labelled = "billing:app=x,io.cilium.k8s.namespace.labels.team=pay@default"
    assert _own(spec, labelled, api, "ingress", "80")[0] == "denied"


@pytest.mark.parametrize(
    ("written", "enforced", "looks_like"),
    [("0100", 64, 100), ("00443", 291, 443), ("0x50", 80, None), ("8_080", 8080, None),
     ("0o17", 15, None), ("010", 8, 10)],
)  # fmt: skip
def test_a_port_string_is_read_as_go_reads_a_literal(
    written: str, enforced: int, looks_like: int | None
) -> None:
    """Cilium parses ``port`` with Go's ParseUint in base 0: a leading 0 is octal, ``0x``
    hex, ``0o`` octal, ``_`` a separator. The rule admits the port Cilium reads, not the
    one a reader sees."""
    spec = {
        "endpointSelector": API,
        "ingress": [{"toPorts": [{"ports": [{"port": written, "protocol": "TCP"}]}]}],
    }
    web, api = "shop:app=web@default", "shop:app=api@default"
    assert _own(spec, web, api, "ingress", str(enforced))[0] == "allowed"
    if looks_like is not None:
        assert _own(spec, web, api, "ingress", str(looks_like))[0] == "denied"


def test_port_zero_with_an_end_port_is_the_range_from_zero() -> None:
    """``port: 0`` alone is every port; with ``endPort: N`` Cilium keeps the range 0-N."""
    ranged = {
        "endpointSelector": API,
        "ingress": [{"toPorts": [{"ports": [{"port": "0", "endPort": 100, "protocol": "TCP"}]}]}],
    }
    every = {
        "endpointSelector": API,
        "ingress": [{"toPorts": [{"ports": [{"port": "0", "protocol": "TCP"}]}]}],
    }
    web, api = "shop:app=web@default", "shop:app=api@default"
    assert _own(ranged, web, api, "ingress", "1")[0] == "allowed"
    assert _own(ranged, web, api, "ingress", "100")[0] == "allowed"
    assert _own(ranged, web, api, "ingress", "101")[0] == "denied"
    assert _own(every, web, api, "ingress", "65535")[0] == "allowed"


def test_each_whole_address_space_is_its_own_world_identity() -> None:
    """Cilium reads ``0.0.0.0/0`` as the world (``world-ipv4`` on a dual-stack agent) and
    ``::/0`` as ``world-ipv6``: a world peer whose address is unknown is selected by the
    whole space of its own family only; with an address, by the family of the address."""
    v6 = {"endpointSelector": API, "egress": [{"toCIDR": ["::/0"]}]}
    v4 = {"endpointSelector": API, "egress": [{"toCIDR": ["0.0.0.0/0"]}]}
    api = "shop:app=api@default"
    assert _own(v6, api, "world", "egress", "443")[0] == "denied"
    assert _own(v6, api, "world-ipv6", "egress", "443")[0] == "allowed"
    assert _own(v6, api, "2001:db8::1", "egress", "443")[0] == "allowed"
    assert _own(v4, api, "world", "egress", "443")[0] == "allowed"
    assert _own(v4, api, "world-ipv4", "egress", "443")[0] == "allowed"
    assert _own(v4, api, "world-ipv6", "egress", "443")[0] == "denied"
    assert _own(v4, api, "2001:db8::1", "egress", "443")[0] == "denied"


def test_trace_spells_every_reserved_identity() -> None:
    """``init`` and ``unmanaged`` (and the two world halves) are identities Cilium polices:
    trace reads them by name, and the entity of the same name selects each."""
    api = "shop:app=api@default"
    for name in ("init", "unmanaged", "health", "world-ipv4"):
        endpoint, address = traced_endpoint(name, "from")
        assert endpoint.labels == (f"reserved:{name}",) and address == ""
        spec = {"endpointSelector": API, "ingress": [{"fromEntities": [name]}]}
        assert _own(spec, name, api, "ingress", "80") == ("allowed", True, "allowed")
        assert _own(spec, "shop:app=web@default", api, "ingress", "80")[0] == "denied"
