"""``cpg lint``: what is wrong with a CiliumNetworkPolicy before it reaches a cluster, whoever
wrote it. Each rule has a code, a level and a fix; a finding names the file, the line and
the field. Pure: the YAML text in, findings out (the CRD schema check is passed in)."""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, Literal

import attrs

from cpg_core._base.cilium_version import Version, format_version
from cpg_core._base.errors import CpgError
from cpg_core._base.labels import NAMESPACE_LABEL, label_problem
from cpg_core._policy.acceptance import refusals
from cpg_core._policy.model import (
    DENY_SECTION,
    EGRESS,
    INGRESS,
    NAMESPACED_KIND,
    SECTIONS,
    PortEntry,
    Rule,
    Selector,
    Spec,
    is_entity_field,
    policy_model,
    selector_labels,
)
from cpg_core._policy.netpol import is_network_policy
from cpg_core._policy.netpol_validation import (
    IPBLOCK_FIXED_SINCE,
    ipblock_only_ingress,
    network_policy_refusals,
)
from cpg_core._policy.policy_docs import policies_in
from cpg_core._policy.port_text import cilium_port, read_differently
from cpg_core._policy.tiers import is_cluster_network_policy
from cpg_core._policy.yaml_ambiguity import Ambiguity, yaml_ambiguities
from cpg_core._policy.yamlread import YamlInputError, load_all, load_all_with_lines
from cpg_core._review.availability import (
    BASELINE_NOTE,
    FIXES,
    availability,
    declared_denials,
    has_baseline,
)
from cpg_core._review.lint_versions import (
    CLUSTER_NETWORK_POLICY_SINCE,
    KAFKA_GONE_SINCE,
    NEWEST,
    version_findings,
)
from cpg_core._synthesis.declarations import Declarations

Level = Literal["error", "warning"]


@attrs.frozen(slots=True)
class SchemaProblem:
    """One thing the CRD schema refuses in a policy."""

    path: tuple[str | int, ...]
    message: str
    unknown_field: bool = False
    """A field the schema does not declare (the API server would prune it)."""
    validator: str = ""
    """The schema keyword that failed (``enum``, ``format``, ``oneOf``, …)."""
    value: object = None
    """The value an ``enum`` refused."""


SchemaCheck = Callable[[Mapping[str, Any]], list[SchemaProblem]]
"""The CRD schema violations and unknown fields of one policy."""

POLICY_KINDS = ("CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy")
_SOURCES = ("k8s:", "any:", "reserved:", "cilium:", "unspec:", "container:")
_WORLD_ENTITIES = frozenset({"world", "all", "world-ipv4", "world-ipv6"})
_EVERYWHERE = frozenset({"0.0.0.0/0", "::/0"})


@attrs.frozen(slots=True)
class LintRule:
    code: str
    name: str
    level: Level
    summary: str
    fix: str


RULES: dict[str, LintRule] = {
    rule.code: rule
    for rule in (
        LintRule(
            "CPG001",
            "yaml",
            "error",
            "The file is not YAML cpg can read safely (invalid YAML or not UTF-8, anchors or "
            "aliases, tags, nesting deeper than 64 levels, a number of more than 30 digits, "
            "too big or not a file).",
            "Write plain UTF-8 YAML with every value in full (no & anchors, * aliases or ! tags), "
            "at most 64 levels deep.",
        ),
        LintRule(
            "CPG002",
            "crd-schema",
            "error",
            "The policy does not validate against the CiliumNetworkPolicy CRD schema: the API "
            "server refuses the whole document.",
            "Correct the field the message names (see the CRD's reference for its shape).",
        ),
        LintRule(
            "CPG003",
            "label-syntax",
            "error",
            "A selector label is not valid Kubernetes label syntax: the API server refuses the "
            "whole document, with its valid rules.",
            "Use a label key of at most 63 characters [A-Za-z0-9-_.] (with an optional DNS "
            "prefix) and a value of at most 63 such characters, starting and ending "
            "alphanumeric.",
        ),
        LintRule(
            "CPG004",
            "empty-endpoint-selector",
            "warning",
            "An empty endpointSelector selects every pod in the namespace (every pod in the "
            "cluster for a clusterwide policy).",
            "Select the workload by its labels (matchLabels: {app: NAME}), or keep it empty "
            "only for a deliberate namespace-wide default.",
        ),
        LintRule(
            "CPG005",
            "empty-peer-selector",
            "warning",
            "An empty fromEndpoints/toEndpoints selector admits every pod (of the namespace, "
            "or of the cluster with a clusterwide policy).",
            "Name the peer by its labels, and its namespace with "
            "k8s:io.kubernetes.pod.namespace when it lives elsewhere.",
        ),
        LintRule(
            "CPG006",
            "open-to-world",
            "warning",
            "The rule admits the whole world: the world or all entity, or 0.0.0.0/0 or ::/0.",
            "Name the destinations: toFQDNs with a DNS rule, or the CIDRs you need.",
        ),
        LintRule(
            "CPG007",
            "cidr-in-pod-range",
            "warning",
            "A CIDR rule inside the cluster's pod CIDR: Cilium's CIDR rules never select pods "
            "it manages, so the rule is dead.",
            "Select the pods by their labels (fromEndpoints/toEndpoints) instead.",
        ),
        LintRule(
            "CPG008",
            "l4-voids-l7",
            "warning",
            "A plain L4 rule and an L7 rule for the same peer and port: Cilium merges them and "
            "the L7 rule then admits every request.",
            "Keep only the L7 rule (add the requests the L4 rule was meant for), or only the L4 "
            "rule.",
        ),
        LintRule(
            "CPG009",
            "port-range",
            "error",
            "A port or endPort outside 0-65535, or a port that is neither a number nor a "
            "name: Cilium refuses the whole document.",
            "Use ports from 1 to 65535 (or a named port of the pod).",
        ),
        LintRule(
            "CPG010",
            "fqdn-without-dns",
            "warning",
            "toFQDNs without an egress DNS rule (rules.dns) that lets the DNS proxy see the "
            "lookups: the names never resolve to IPs, so nothing is admitted.",
            "Add an egress rule to the DNS server (e.g. kube-dns, UDP/53 and TCP/53) with "
            "rules: {dns: [{matchPattern: '*'}]}.",
        ),
        LintRule(
            "CPG011",
            "duplicate-rule",
            "warning",
            "The same rule appears twice in one direction of a policy.",
            "Remove the copy.",
        ),
        LintRule(
            "CPG012",
            "selects-nothing",
            "warning",
            "The endpointSelector selects no pod in the policy's namespace today (the cluster read).",
            "Check the labels and the namespace: a typo here leaves the intended pods open.",
        ),
        LintRule(
            "CPG013",
            "unknown-field",
            "error",
            "A field the CRD does not know: Cilium refuses the document (the API server would "
            "prune the field, leaving a rule other than the one written: a misspelt "
            "fromEndpoint leaves a rule that selects nothing, or everything).",
            "Spell the field as the CRD does (fromEndpoints, toPorts, …), or remove it.",
        ),
        LintRule(
            "CPG014",
            "top-level-description",
            "error",
            "A description beside spec, at the top of the document: Cilium refuses it.",
            "Move it to spec.description (or specs[].description).",
        ),
        LintRule(
            "CPG015",
            "empty-policy",
            "error",
            "A policy with no spec, or a spec with no ingress, ingressDeny, egress or egressDeny "
            "rule: Cilium refuses it.",
            "Give the spec its rules; for a default-deny, ingress: [{}] and egress: [{}].",
        ),
        LintRule(
            "CPG016",
            "selector-expression",
            "error",
            "A matchExpressions term Kubernetes refuses: In or NotIn without values, Exists or "
            "DoesNotExist with values.",
            "Give In/NotIn at least one value; leave values out for Exists/DoesNotExist.",
        ),
        LintRule(
            "CPG017",
            "peer-combination",
            "error",
            "Two kinds of peer in one rule (toEndpoints with toCIDR, toFQDNs with toEndpoints, "
            "…): Cilium refuses the combination.",
            "Split it into one rule per kind of peer, each with its own toPorts.",
        ),
        LintRule(
            "CPG018",
            "icmp-with-ports",
            "error",
            "toPorts and icmps in one rule: Cilium refuses it.",
            "Put the ICMP types in a rule of their own with the same peers.",
        ),
        LintRule(
            "CPG019",
            "cidr-except",
            "error",
            "An except CIDR outside its cidr (or of the other address family): Cilium refuses "
            "the document.",
            "List only exceptions inside the cidr they narrow.",
        ),
        LintRule(
            "CPG020",
            "port-entry",
            "error",
            "A port entry Cilium refuses: no port at all, or a port on a protocol without ports "
            "(VRRP, IGMP).",
            'Give the port (port: "0" for every port), and 0 for VRRP and IGMP.',
        ),
        LintRule(
            "CPG021",
            "l7-rule",
            "error",
            "L7 rules where Cilium refuses them: HTTP on a protocol other than TCP, L7 on port "
            "0, DNS on ingress, on a port range or without a port, L7 in a host policy, "
            "serverNames with L7 rules but no terminatingTLS, a listener on ingress or with L7 "
            "rules.",
            "HTTP rules go on TCP ports, DNS rules on egress port 53 (UDP and TCP), each with "
            "its port given.",
        ),
        LintRule(
            "CPG022",
            "l7-regex",
            "error",
            "An HTTP path or method that is not a Go (RE2) regular expression: Cilium refuses "
            "the document.",
            "Write an RE2 expression: no lookarounds or backreferences, balanced parentheses.",
        ),
        LintRule(
            "CPG023",
            "end-port-below",
            "warning",
            "An endPort below its port: Cilium reads the single port, not a range.",
            "Give the range as port (low) and endPort (high), or drop endPort.",
        ),
        LintRule(
            "CPG024",
            "init-in-namespaced",
            "error",
            "A CiliumNetworkPolicy whose endpointSelector names reserved:init: Cilium refuses it.",
            "Police initializing endpoints with a CiliumClusterwideNetworkPolicy.",
        ),
        LintRule(
            "CPG025",
            "icmp-type",
            "error",
            "An ICMP type name that is not a type of its family (PacketTooBig in IPv4, "
            "Timestamp in IPv6): Cilium refuses the document.",
            "Use the family the type belongs to (family: IPv6), or its number.",
        ),
        LintRule(
            "CPG026",
            "node-selector-peers",
            "error",
            "fromNodes/toNodes: Cilium refuses them unless its agents run with "
            "enable-node-selector-labels.",
            "Use the host or remote-node entity, or turn enable-node-selector-labels on.",
        ),
        LintRule(
            "CPG027",
            "port-read-as-octal",
            "warning",
            'A port string Cilium reads in another base than it looks: "0100" is port 64 '
            '(a leading 0 is octal), "0x50" is 80. Cilium accepts it and enforces that port.',
            'Write the port in plain decimal ("100").',
        ),
        LintRule(
            "CPG028",
            "subject-in-other-namespace",
            "warning",
            "A namespaced policy whose endpointSelector names another namespace: Cilium adds "
            "the policy's own namespace, so the policy selects no pod (the pods it names stay "
            "as open as before).",
            "Put the policy in the namespace of the pods it is for, or use a "
            "CiliumClusterwideNetworkPolicy.",
        ),
        LintRule(
            "CPG029",
            "node-selector-in-namespaced",
            "error",
            "A CiliumNetworkPolicy with nodeSelector: Cilium refuses it (host policies are "
            "clusterwide).",
            "Write the host policy as a CiliumClusterwideNetworkPolicy.",
        ),
        LintRule(
            "CPG030",
            "deprecated",
            "warning",
            "A field the Cilium release the documents are for deprecates: fromRequires/toRequires, "
            "Kafka rules.",
            "Select peers with fromEndpoints/toEndpoints; Kafka rules have no replacement "
            "in Cilium's policy.",
        ),
        LintRule(
            "CPG031",
            "not-in-version",
            "error",
            "A feature the Cilium release the documents are for does not have: the cluster-mesh "
            "entity before 1.20 (refused), ** in matchPattern before 1.19 (read as *).",
            "Upgrade Cilium first, or write what that release reads (cluster entities, one "
            "pattern per DNS depth).",
        ),
        LintRule(
            "CPG032",
            "audit-mode-annotation",
            "warning",
            "The annotation policy.cilium.io/audit-mode, widely copied, does nothing: the "
            "policy is enforced.",
            "Put the endpoints in audit mode with the agent's policy-audit-mode (or cilium "
            "endpoint config), or test the policy with cpg plan and cpg shadow first.",
        ),
        LintRule(
            "CPG033",
            "cluster-scope",
            "warning",
            "In a file that selects ClusterMesh peers by cluster, a selector naming no cluster "
            "selects that peer in every cluster before Cilium 1.19 (policy-default-local-cluster "
            "off).",
            "Name the cluster (io.cilium.k8s.policy.cluster) where it matters.",
        ),
        LintRule(
            "CPG035",
            "cluster-network-policy-release",
            "error",
            "A Kubernetes ClusterNetworkPolicy for a Cilium release that does not read it (before "
            "1.20): the API server may take it, but nothing enforces it.",
            "Upgrade to Cilium 1.20 or write the rules as a CiliumClusterwideNetworkPolicy.",
        ),
        LintRule(
            "CPG040",
            "egress-without-dns",
            "warning",
            "Pods in egress default-deny that cannot resolve names (UDP and TCP 53 to the "
            "cluster's DNS service), in the files linted together.",
            FIXES["CPG040"],
        ),
        LintRule(
            "CPG041",
            "cluster-service-per-caller",
            "warning",
            "The DNS service, or a port pods of many namespaces reach, admits its callers one by "
            "one (or a client reaches pods of many namespaces one by one): a pod of a new "
            "namespace could not reach it (or be reached).",
            FIXES["CPG041"],
        ),
        LintRule(
            "CPG042",
            "dns-forwarder-allowlist",
            "warning",
            "A DNS service whose upstream DNS rules name names: every other name any pod asks "
            "it for stops resolving.",
            FIXES["CPG042"],
        ),
        LintRule(
            "CPG043",
            "baseline-not-enforced",
            "warning",
            "A Baseline ClusterNetworkPolicy for a Cilium release that does not enforce it "
            "(before 1.20): the workloads whose egress only it holds are not policed at all.",
            FIXES["CPG043"],
        ),
        LintRule(
            "CPG044",
            "baseline-deny-gaps",
            "warning",
            "A Baseline Deny holds pods and addresses only: the host, remote nodes, the API "
            "server, health checks and Cilium's ingress stay open to the pods it keeps.",
            FIXES["CPG044"],
        ),
        LintRule(
            "CPG045",
            "declared-dependency-denied",
            "warning",
            "A policy polices an end of a connection the cluster's own objects declare (a "
            "webhook or aggregated API the API server calls, a target a Prometheus scrapes, the "
            "node-local DNS cache) and no rule admits it (given the cluster's declarations).",
            FIXES["CPG045"],
        ),
        LintRule(
            "CPG046",
            "policy-does-nothing",
            "warning",
            "A policy whose only content is an empty specs list: Cilium accepts it, selects no "
            "endpoint with it and enforces nothing (a generator or template that lost its rules).",
            "Give it the specs it was meant to hold, or delete it.",
        ),
        LintRule(
            "CPG047",
            "networkpolicy-invalid",
            "error",
            "A Kubernetes NetworkPolicy the API server refuses (its own validation: a peer with "
            "ipBlock and a selector, or none; except outside cidr; a protocol other than TCP, "
            "UDP, SCTP; a port out of range or a bad port name; endPort without a numeric port "
            "or below it; a bad label selector; policyTypes other than Ingress and Egress; a "
            "field of the wrong type or unknown): it is never stored, so the file does not apply.",
            "Fix the field the finding names; kubectl apply --dry-run=server shows the API "
            "server's own words.",
        ),
        LintRule(
            "CPG048",
            "duplicate-key",
            "error",
            "A mapping key given twice in one mapping: cpg's reader and PyYAML keep the last, a "
            "person reviewing reads the first, and kubectl's strict field check refuses it.",
            "Keep one of them (merge the two lists under one key).",
        ),
        LintRule(
            "CPG049",
            "yaml-boolean-read-differently",
            "error",
            "An unquoted y, Y, n or N: kubectl's YAML 1.1 decoder sends the boolean true or "
            "false, while cpg's reader (and PyYAML, kustomize) read the text: the policy "
            "reviewed is not the policy applied (a label value that is a boolean is refused).",
            'Quote it ("y"), or write true or false when a boolean is meant.',
        ),
        LintRule(
            "CPG050",
            "yaml-1.1-boolean",
            "warning",
            "An unquoted yes, no, on or off: kubectl and cpg read a boolean, YAML 1.2 tools "
            "(kustomize, yq) the text, so the same file means two things in one pipeline.",
            'Quote it ("yes") for a text, or write true or false.',
        ),
        LintRule(
            "CPG051",
            "number-out-of-range",
            "error",
            "An integer beyond 64 bits: the API server's decoder refuses it.",
            "Write the number the field takes (a port, an ICMP type, a count).",
        ),
        LintRule(
            "CPG052",
            "networkpolicy-ipblock-release",
            "warning",
            "A NetworkPolicy ingress peer that is an ipBlock alone, linted for a Cilium release "
            "before the fix of cilium/cilium#46305 (1.20; 1.19 patch releases from June 2026): "
            "with a cluster name set, those agents also admit every pod of the policy's "
            "namespace there.",
            "Upgrade the agents to a release with the fix; until then, know that the rule "
            "admits the namespace's pods too.",
        ),
        LintRule(
            "CPG034",
            "invalid-in-cluster",
            "error",
            "A policy in the cluster that Cilium's operator marked Valid=False (the cluster read): it "
            "is applied but enforces nothing of what it says.",
            "Fix what the condition's message names and apply it again.",
        ),
    )
}


@attrs.frozen(slots=True)
class LintFinding:
    code: str
    name: str
    level: Level
    message: str
    fix: str
    file: str
    line: int
    """1-based; 0 when the finding is about the whole file."""
    field: str
    """Where in the document: ``spec.ingress[0].fromEndpoints[1]``."""
    policy: str
    """``namespace/name`` of the policy ("" when the file could not be read)."""


def finding(code: str, message: str, file: str, line: int, field: str, policy: str) -> LintFinding:
    rule = RULES[code]
    return LintFinding(code, rule.name, rule.level, message, rule.fix, file, line, field, policy)


def _field(path: Sequence[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


class _Lines:
    """Line numbers of the fields of one YAML document, by path."""

    def __init__(self, lines: dict[tuple[str | int, ...], int]) -> None:
        self.lines = lines

    def of(self, path: Sequence[str | int]) -> int:
        """The line of ``path``, or of its nearest ancestor the document has."""
        key = tuple(path)
        while key:
            if key in self.lines:
                return self.lines[key]
            key = key[:-1]
        return self.lines.get((), 1)


def lint_text(
    text: str,
    file: str,
    *,
    schema: SchemaCheck | None = None,
    pod_cidrs: Iterable[str] = (),
    pods: Mapping[str, Sequence[Mapping[str, str]]] | None = None,
    cilium_version: Version = NEWEST,
) -> list[LintFinding]:
    """Every finding of one YAML file (several documents and ``kind: List`` included);
    documents that are not Cilium policies are left alone. ``cilium_version`` is the
    release the documents are meant for (its deprecations and missing features)."""
    try:
        documents = load_all_with_lines(text, file)
    except YamlInputError as exc:
        return [finding("CPG001", _unreadable(exc, file), file, exc.line, "", "")]
    found = _documents_findings(documents, file, schema, pod_cidrs, pods, cilium_version)
    return found + _ambiguity_findings(text, documents, file)


def _documents_findings(
    documents: Sequence[tuple[Any, dict[tuple[str | int, ...], int]]],
    file: str,
    schema: SchemaCheck | None,
    pod_cidrs: Iterable[str],
    pods: Mapping[str, Sequence[Mapping[str, str]]] | None,
    cilium_version: Version,
) -> list[LintFinding]:
    networks = [ipaddress.ip_network(c, strict=False) for c in pod_cidrs]
    found: list[LintFinding] = []
    for document, where in documents:
        lines = _Lines(where)
        for path, policy in _policies(document):
            found += _lint_policy(policy, path, lines, file, schema, networks, cilium_version)
            if pods is not None and not is_network_policy(policy):
                found += _selects_nothing(policy, path, lines, file, pods)
    return found


_AMBIGUITY_CODES = {
    "duplicate-key": "CPG048",
    "yaml11-boolean-text": "CPG049",
    "yaml11-boolean": "CPG050",
    "integer-range": "CPG051",
}


def _ambiguity_findings(
    text: str, documents: Sequence[tuple[Any, Mapping[Any, int]]], file: str
) -> list[LintFinding]:
    """What readers take differently in the policies of ``text`` (documents lint reads
    only: a ConfigMap's ``enabled: on`` is not lint's to judge)."""
    linted = {n for n, (document, _lines) in enumerate(documents) if _policies(document)}
    if not linted:
        return []
    found = []
    for item in yaml_ambiguities(text):
        if item.document not in linted:
            continue
        policies = _policies(documents[item.document][0])
        name = next((policy_label(p) for base, p in policies if item.path[: len(base)] == base), "")
        found.append(
            finding(
                _AMBIGUITY_CODES[item.kind],
                _ambiguity_text(item),
                file,
                item.line,
                _field(item.path),
                name,
            )
        )
    return found


def _ambiguity_text(item: Ambiguity) -> str:
    if item.kind == "duplicate-key":
        return f"{item.text} is given twice in this mapping: cpg reads the last one"
    if item.kind == "yaml11-boolean-text":
        meant = "true" if item.text in ("y", "Y") else "false"
        return (
            f"unquoted {item.text}: kubectl sends the boolean {meant}, cpg reads the text "
            f"{item.text!r}"
        )
    if item.kind == "yaml11-boolean":
        return (
            f"unquoted {item.text}: kubectl and cpg read a boolean, YAML 1.2 tools the text "
            f"{item.text!r}"
        )
    return f"{item.text} does not fit in 64 bits"


AVAILABILITY_CODES = ("CPG040", "CPG041", "CPG042", "CPG043", "CPG044", "CPG045")
"""The rules judged over every file linted together (a workload's DNS may be in another)."""


@attrs.frozen(slots=True)
class Together:
    """What the files linted together say: their availability findings, and notes."""

    findings: list[LintFinding]
    notes: tuple[str, ...] = ()


def lint_together(
    texts: Sequence[tuple[str, str]],
    *,
    cilium_version: Version = NEWEST,
    declarations: Declarations | None = None,
) -> Together:
    """The availability findings of the policies of every ``(file, text)`` taken together
    (§D47; with ``declarations``, the dependencies they deny: §D58), each on the file and
    line of the policy it is about, and the notes they need; files cpg cannot read are left
    to :func:`lint_text` (CPG001)."""
    read: list[tuple[str, str, Sequence[Any]]] = []
    for file, text in texts:
        try:  # libyaml: lint_text has read the file its own way already, with lines
            read.append((file, text, load_all(text, file)))
        except CpgError:
            continue
    return _together(read, cilium_version, declarations)


def _together(
    read: Sequence[tuple[str, str, Sequence[Any]]],
    cilium_version: Version,
    declarations: Declarations | None = None,
) -> Together:
    policies: list[Mapping[str, Any]] = []
    where: dict[str, tuple[str, int]] = {}
    for file, text, documents in read:
        for document in documents:
            for _path, policy in _policies(document):
                try:
                    readable = policies_in(policy)
                except CpgError:
                    continue  # its shape is a finding of lint_text's
                policies += readable
                for each in readable:
                    where.setdefault(policy_label(each), (file, _line_of(text, each)))
    enforced = cilium_version >= (1, 20, 0)
    found = []
    judged = availability(policies, baseline_enforced=enforced)
    if declarations is not None:
        judged += declared_denials(policies, declarations)
    for item in judged:
        file, line = where.get(item.policy, ("", 0))
        found.append(finding(item.code, item.message, file, line, "", item.policy))
    return Together(found, (BASELINE_NOTE,) if enforced and has_baseline(policies) else ())


def lint_texts(
    texts: Sequence[tuple[str, str]],
    *,
    schema: SchemaCheck | None = None,
    pod_cidrs: Iterable[str] = (),
    pods: Mapping[str, Sequence[Mapping[str, str]]] | None = None,
    cilium_version: Version = NEWEST,
    declarations: Declarations | None = None,
) -> tuple[list[LintFinding], Together]:
    """:func:`lint_text` of every ``(file, text)`` and :func:`lint_together` of them all,
    each file read once (its documents and their models serve both); with
    ``declarations``, what the cluster declares is judged with them (CPG045)."""
    found: list[LintFinding] = []
    read: list[tuple[str, str, Sequence[Any]]] = []
    for file, text in texts:
        try:
            documents = load_all_with_lines(text, file)
        except YamlInputError as exc:
            found.append(finding("CPG001", _unreadable(exc, file), file, exc.line, "", ""))
            continue
        found += _documents_findings(documents, file, schema, pod_cidrs, pods, cilium_version)
        found += _ambiguity_findings(text, documents, file)
        read.append((file, text, [document for document, _lines in documents]))
    return found, _together(read, cilium_version, declarations)


def unreadable_file(file: str, reason: str) -> LintFinding:
    """CPG001 for a file that could not even be read (too big, not UTF-8, not a file)."""
    return finding("CPG001", reason, file, 0, "", "")


def _unreadable(error: YamlInputError, file: str) -> str:
    """What made a file unreadable, without its name (the finding names the file)."""
    text = str(error)
    return text.removeprefix(f"{file}: ")


def _line_of(text: str, policy: Mapping[str, Any]) -> int:
    """The line that names ``policy`` (its ``name:``), 1 when it cannot be found."""
    metadata = policy.get("metadata")
    name = metadata.get("name") if isinstance(metadata, Mapping) else None
    at = text.find(f"name: {name}") if isinstance(name, str) else -1
    return text.count("\n", 0, at) + 1 if at >= 0 else 1


def _policies(document: Any) -> list[tuple[tuple[str | int, ...], Mapping[str, Any]]]:
    if not isinstance(document, Mapping):
        return []
    kind = document.get("kind")
    if _is_linted(document):
        return [((), document)]
    items = document.get("items")
    if isinstance(kind, str) and kind.endswith("List") and isinstance(items, list):
        return [
            (("items", n), item)
            for n, item in enumerate(items)
            if isinstance(item, Mapping) and _is_linted(item)
        ]
    return []


def _is_linted(document: Mapping[str, Any]) -> bool:
    """A policy lint reads: Cilium's, and Kubernetes' NetworkPolicy and ClusterNetworkPolicy
    (every kind plan judges)."""
    return (
        document.get("kind") in POLICY_KINDS
        or is_cluster_network_policy(document)
        or is_network_policy(document)
    )


def policy_label(policy: Mapping[str, Any]) -> str:
    meta = policy.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    return f"{meta.get('namespace', '')}/{meta.get('name', '?')}".lstrip("/")


def _lint_policy(
    policy: Mapping[str, Any],
    base: tuple[str | int, ...],
    lines: _Lines,
    file: str,
    schema: SchemaCheck | None,
    networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network],
    version: Version = NEWEST,
) -> list[LintFinding]:
    name = policy_label(policy)
    if is_network_policy(policy):  # Kubernetes' own validation, not Cilium's CRD
        found = _network_policy_findings(policy, version)
    elif is_cluster_network_policy(policy):  # Kubernetes' API: its schema, labels, release
        found = _schema_findings(policy, schema, version)
        found += _cluster_network_policy_findings(policy, version)
    else:
        found = _schema_findings(policy, schema, version)
        found += _cilium_policy_findings(policy, networks, version)
    out = []
    for code, message, path in found:
        where = (*base, *path)
        out.append(finding(code, message, file, lines.of(where), _field(where), name))
    return out


def _schema_findings(
    policy: Mapping[str, Any], schema: SchemaCheck | None, version: Version
) -> list[Found]:
    found: list[Found] = []
    for problem in schema(policy) if schema is not None else []:
        if _known_to(problem, version):
            continue
        if problem.unknown_field:
            found.append(("CPG013", _unknown_text(problem.path), problem.path))
        else:
            found.append(("CPG002", problem.message, problem.path))
    return found


def _cluster_network_policy_findings(policy: Mapping[str, Any], version: Version) -> list[Found]:
    found: list[Found] = []
    if version < CLUSTER_NETWORK_POLICY_SINCE:
        found.append(
            (
                "CPG035",
                f"Cilium {format_version(version)[:-2]} does not read ClusterNetworkPolicy "
                "(from 1.20)",
                ("kind",),
            )
        )
    for path, key, value in selector_labels(policy):
        label = label_problem(key, value)
        if label:
            found.append(("CPG003", label, path))
    return found


def _network_policy_findings(policy: Mapping[str, Any], version: Version) -> list[Found]:
    found = network_policy_refusals(policy)
    spec = policy.get("spec")
    rules = spec.get("ingress") if isinstance(spec, Mapping) else None
    for n, rule in enumerate(rules if isinstance(rules, list) else []):
        if isinstance(rule, Mapping) and not rule.get("from"):
            found.append(
                (
                    "CPG006",
                    "an ingress rule without from admits every source, outside the cluster too",
                    ("spec", "ingress", n),
                )
            )
    if version < IPBLOCK_FIXED_SINCE:
        for path in ipblock_only_ingress(policy):
            found.append(
                (
                    "CPG052",
                    f"Cilium {format_version(version)} (before the fix of cilium/cilium#46305) "
                    "with a cluster name set also admits every pod of the policy's namespace "
                    "through this ipBlock-only peer",
                    path,
                )
            )
    return found


def _cilium_policy_findings(
    policy: Mapping[str, Any],
    networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network],
    version: Version,
) -> list[Found]:
    found = refusals(policy) + version_findings(policy, version)
    if policy.get("specs") == [] and not isinstance(policy.get("spec"), Mapping):
        found.append(
            (
                "CPG046",
                "an empty specs list and no spec: Cilium accepts the policy, and it does nothing",
                ("specs",),
            )
        )
    for path, key, value in selector_labels(policy):
        label = label_problem(_unsourced(key), value)
        if label:
            found.append(("CPG003", label, path))
    model = policy_model(policy)
    home = model.namespace
    for spec in model.specs:
        found += _spec_findings(spec, networks)
        other = _subject_namespaces(spec.subject, home)
        if other and spec.subject is not None:
            found.append(
                (
                    "CPG028",
                    f"the endpointSelector names namespace {other}, but the policy lives in "
                    f"{home}: Cilium adds {home}, so it selects no pod",
                    spec.subject.path,
                )
            )
    return found


def _subject_namespaces(selector: Selector | None, home: str | None) -> str:
    """The namespaces a namespaced policy's subject selector requires when none of them is
    the policy's own (so it can select nothing), spelled for a message; "" otherwise."""
    if home is None or selector is None or not isinstance(selector.written, Mapping):
        return ""
    wanted: list[str] = []
    for key, value in selector.labels:
        if _unsourced(key) == NAMESPACE_LABEL and value != home:
            wanted.append(value)
    for term in selector.expressions:
        if (
            _unsourced(term.key) == NAMESPACE_LABEL
            and term.operator == "In"
            and term.listed
            and home not in term.values
        ):
            wanted += list(term.values)
    return ", ".join(sorted(set(wanted)))


def _known_to(problem: SchemaProblem, version: Version) -> bool:
    """A schema problem that is no problem for ``version``, or that another rule names: the
    top-level description (CPG014), the cluster-mesh entity of Cilium 1.20 (the shipped CRD
    was cut before it; CPG031 names it for older releases), Kafka rules before 1.20 (CPG030)."""
    path = problem.path
    if problem.unknown_field and path == ("description",):
        return True
    if problem.validator == "enum" and problem.value == "cluster-mesh":
        return len(path) >= 2 and is_entity_field(str(path[-2]))
    if version < KAFKA_GONE_SINCE and "rules" in path:
        tail = path[path.index("rules") + 1 :]
        if problem.unknown_field and tail[:1] in (("kafka",), ("l7proto",), ("l7",)):
            return True
        return problem.validator == "oneOf" and not tail
    return False


def _unknown_text(path: tuple[str | int, ...]) -> str:
    where = _field(path)
    last = str(path[-1])
    if last == "rules" and any(str(p).endswith("Deny") for p in path):
        return f"unknown field {where}: deny rules take no L7 rules (Cilium refuses it)"
    return f"unknown field {where}: Cilium refuses the document (the API server would prune it)"


def _selects_nothing(
    policy: Mapping[str, Any],
    base: tuple[str | int, ...],
    lines: _Lines,
    file: str,
    pods: Mapping[str, Sequence[Mapping[str, str]]],
) -> list[LintFinding]:
    """CPG012 for a namespaced policy whose endpointSelector selects none of ``pods`` (the
    labels of the pods of each namespace, as the cluster has them today)."""
    model = policy_model(policy)
    namespace = model.written_namespace
    spec = model.specs[0] if model.specs and not model.specs[0].in_specs else None
    if model.kind != NAMESPACED_KIND or not namespace or spec is None:
        return []
    selector = spec.subject
    if selector is None or not isinstance(selector.written, Mapping):
        return []
    namespaced = [
        {**labels, "io.kubernetes.pod.namespace": str(namespace)}  # Cilium adds it to each pod
        for labels in pods.get(str(namespace), [])
    ]
    if any(selects(selector, labels) for labels in namespaced):
        return []
    where = (*base, *selector.path)
    count = len(pods.get(str(namespace), []))
    message = f"selects none of the {count} pods in {namespace} today"
    return [finding("CPG012", message, file, lines.of(where), _field(where), policy_label(policy))]


def selects(selector: Selector, labels: Mapping[str, str]) -> bool:
    """Whether a label selector (its labels and expressions) selects a pod's labels."""
    for key, value in selector.labels_written:
        if labels.get(_unsourced(str(key))) != str(value):
            return False
    for expression in selector.expressions:
        key = _unsourced(expression.key)
        operator = expression.operator
        values = set(expression.values)
        present = key in labels
        if operator == "In" and not (present and labels[key] in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
        if operator == "Exists" and not present:
            return False
        if operator == "DoesNotExist" and present:
            return False
    return True


def _unsourced(key: str) -> str:
    for source in _SOURCES:
        if key.startswith(source):
            return key[len(source) :]
    return key


Found = tuple[str, str, tuple[str | int, ...]]


def _spec_findings(
    spec: Spec, networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]
) -> list[Found]:
    found: list[Found] = []
    subject = spec.subject
    if (
        subject is not None
        and isinstance(subject.written, Mapping)
        and _empty_selector(subject)
        and not _default_deny(spec)
    ):
        found.append(("CPG004", "endpointSelector: {} selects every pod", subject.path))
    fqdn_rules: list[tuple[str | int, ...]] = []
    dns_visible = False
    for section in SECTIONS:
        rules = spec.rules(section)
        seen: dict[str, int] = {}
        for rule in rules:
            canonical = json.dumps(rule.written, sort_keys=True, default=str)
            if canonical in seen:
                found.append(
                    ("CPG011", f"the same rule as {section}[{seen[canonical]}]", rule.path)
                )
            else:
                seen[canonical] = rule.index
            found += _rule_findings(rule, networks)
            if rule.has_fqdn_field:
                fqdn_rules.append(rule.fqdn_path)
            if section == EGRESS and any(p.has_dns for p in rule.port_rules):
                dns_visible = True
        if section in (INGRESS, EGRESS):
            found += _l4_beside_l7(rules)
    if fqdn_rules and not dns_visible:
        for where in fqdn_rules:
            found.append(
                ("CPG010", "toFQDNs, but no egress rule of this policy has rules.dns", where)
            )
    return found


def _default_deny(spec: Spec) -> bool:
    """Whether every rule of the spec is empty: Cilium's default-deny idiom, which is meant
    to select every pod of the namespace."""
    rules = [*spec.written_rules(INGRESS), *spec.written_rules(EGRESS)]
    return (
        bool(rules)
        and all(r == {} for r in rules)
        and not any(spec.written_rules(DENY_SECTION[d]) for d in (INGRESS, EGRESS))
    )


def _empty_selector(selector: Selector) -> bool:
    return not selector.labels_written and not selector.expressions_written


def _rule_findings(
    rule: Rule, networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]
) -> list[Found]:
    return (
        _open_peer_findings(rule)
        + _cidr_findings(rule, networks)
        + [
            (code, problem, port.path)
            for port_rule in rule.port_rules
            for port in port_rule.ports
            for code, problem in [_port_problem(port)]
            if code
        ]
    )


def _open_peer_findings(rule: Rule) -> list[Found]:
    """Empty peer selectors (every pod) and world entities (the whole world)."""
    found: list[Found] = []
    for peer in rule.endpoints:
        if isinstance(peer.written, Mapping) and _empty_selector(peer):
            found.append(("CPG005", f"{rule.endpoint_field}: {{}} selects every pod", peer.path))
    for n, entity in enumerate(rule.entities):
        if entity in _WORLD_ENTITIES:
            found.append(
                (
                    "CPG006",
                    f"{rule.entity_field}: {entity} admits the whole world",
                    (*rule.path, rule.entity_field, n),
                )
            )
    return found


def _cidr_findings(
    rule: Rule, networks: Sequence[ipaddress.IPv4Network | ipaddress.IPv6Network]
) -> list[Found]:
    """CIDRs that admit the whole world, or that lie inside the pod range (dead rules)."""
    found: list[Found] = []
    for entry in rule.cidrs:
        if entry.from_set and not entry.cidr:
            continue
        cidr, where = str(entry.cidr), entry.path
        if cidr in _EVERYWHERE:
            found.append(("CPG006", f"{cidr} admits the whole world", where))
            continue
        try:
            network = ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            continue  # the schema check names it
        for pods in networks:
            if network.version == pods.version and network.subnet_of(pods):  # type: ignore[arg-type]
                found.append(("CPG007", f"{cidr} is inside the pod CIDR {pods}", where))
                break
    return found


def _number(value: Any) -> int | None:
    try:
        return int(str(value))
    except ValueError:
        return None


def _port_problem(port: PortEntry) -> tuple[str, str]:
    text = str(port.port_written or "")
    number = cilium_port(text)
    end = _number(port.end_written) if port.end_written is not None else None
    if text.isdigit() and number is None:
        return "CPG009", f"port {text} is not a port Cilium parses (0-65535)"
    if end is not None and not 0 <= end <= 65535:
        return "CPG009", f"endPort {end} is outside 0-65535"
    if number is not None and read_differently(text):
        return "CPG027", (
            f'port "{text}" is port {number} to Cilium, which reads a leading 0 as octal (0x as '
            "hex, _ as a separator)"
        )
    if end is not None and number is not None and 0 < end < number:
        return "CPG023", f"endPort {end} is below port {number}: Cilium reads port {number} alone"
    return "", ""


def _l4_beside_l7(rules: Sequence[Rule]) -> list[Found]:
    """An L4-only port and an L7 port for the same peers and port, in any two rules."""
    plain: dict[tuple[str, str, str], tuple[str | int, ...]] = {}
    layered: dict[tuple[str, str, str], tuple[str | int, ...]] = {}
    for rule in rules:
        peers = rule.peers_key
        for port_rule in rule.port_rules:
            target = layered if port_rule.has_l7 else plain
            for port in port_rule.ports:
                protocol = str(port.protocol_written or "ANY").upper()
                for proto in ("TCP", "UDP", "SCTP") if protocol == "ANY" else (protocol,):
                    target.setdefault((peers, port.port_text, proto), port_rule.path)
    found: list[Found] = []
    for key, where in sorted(layered.items(), key=lambda item: item[1]):
        if key in plain:
            rule_n = plain[key][-3]
            found.append(
                (
                    "CPG008",
                    f"port {key[1]}/{key[2]} has an L7 rule here and a plain L4 rule in rule "
                    f"{rule_n} for the same peers: every request is admitted",
                    where,
                )
            )
    return found


def policy_namespaces(text: str) -> set[str]:
    """The namespaces of the CiliumNetworkPolicies in a YAML text (none when unreadable)."""
    try:
        documents = load_all(text, "")
    except YamlInputError:
        return set()
    found = set()
    for document in documents:
        for _path, policy in _policies(document):
            meta = policy.get("metadata")
            namespace = meta.get("namespace") if isinstance(meta, Mapping) else None
            if policy.get("kind") == "CiliumNetworkPolicy" and namespace:
                found.add(str(namespace))
    return found


def invalid_in_cluster(policies: Iterable[Mapping[str, Any]]) -> list[LintFinding]:
    """CPG034 for each policy read from a cluster that Cilium's operator marked
    ``Valid=False`` in its status conditions, with the operator's message."""
    found = []
    for policy in policies:
        status = policy.get("status")
        conditions = status.get("conditions") if isinstance(status, Mapping) else None
        for condition in conditions or []:
            if not isinstance(condition, Mapping) or condition.get("type") != "Valid":
                continue
            if str(condition.get("status")) != "False":
                continue
            name = policy_label(policy)
            kind = str(policy.get("kind") or "CiliumNetworkPolicy")
            message = str(condition.get("message") or "no message").strip()
            since = condition.get("lastTransitionTime")
            text = f"{kind} {name} is Valid=False: {message}" + (
                f" (since {since})" if since else ""
            )
            found.append(
                finding("CPG034", text, f"cluster:{kind}/{name}", 0, "status.conditions", name)
            )
    return found
