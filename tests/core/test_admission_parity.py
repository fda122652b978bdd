"""The admission guard says what lint says: every CEL expression the guard enforces,
evaluated by Google's CEL (cel-cpp, beside the API server's cel-go) on every lint fixture,
every policy cpg ships as an example and every document of Cilium's verdict sets, agrees
with lint on its rule (a document lint flags with the rule is refused by the expression,
and one lint does not flag is admitted)."""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import pytest

from conftest import SHARED
from cpg_core._policy.admission_cel import ADMISSION_VARIABLES, NOT_AT_ADMISSION, SIZE_CHECK
from cpg_core._policy.netpol import is_network_policy
from cpg_core._policy.netpol_validation import network_policy_refusals
from cpg_core._policy.tiers import is_cluster_network_policy
from cpg_core._policy.yamlread import load_all
from cpg_core._reports.admission import admission_checks
from cpg_core._review.lint import RULES
from cpg_core._review.lint_versions import NEWEST, SUPPORTED
from cpg_core.lint import lint_text
from cpg_io.crd_schema import crd_schema_errors

cel = pytest.importorskip("cel_expr_python.cel")
ROOT = Path(__file__).resolve().parents[2]
KINDS = ("CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy")


def _lint_cases() -> Iterator[tuple[str, Any]]:
    spec = importlib.util.spec_from_file_location("lint_cases", ROOT / "tests/cli/test_lint_cli.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    for code, (bad, good, *_more) in module.CASES.items():
        yield f"lint-case:{code}:bad", bad
        yield f"lint-case:{code}:good", good
    for code, (bad, good) in module.TEXT_CASES.items():
        for n, document in enumerate(load_all(bad, code) + load_all(good, code)):
            yield f"lint-text:{code}:{n}", document


def _cluster_network_policies() -> Iterator[tuple[str, Any]]:
    """ClusterNetworkPolicies beside lint's one: labels as Kubernetes writes them (a Cilium
    source prefix is no part of a Kubernetes key), good and bad, in each selector place."""
    spec = importlib.util.spec_from_file_location("lint_cases", ROOT / "tests/cli/test_lint_cli.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    base = module.cluster_network_policy()
    yield "cnp:plain", base
    for n, labels in enumerate(({"k8s:app": "web"}, {"app": "front end"}, {"app": "web"})):
        changed = json.loads(json.dumps(base))
        changed["spec"]["subject"] = {
            "pods": {"namespaceSelector": {}, "podSelector": {"matchLabels": labels}}
        }
        yield f"cnp:subject-{n}", changed
        peer = json.loads(json.dumps(base))
        peer["spec"]["egress"][0]["to"][0]["pods"]["podSelector"] = {"matchLabels": labels}
        yield f"cnp:peer-{n}", peer


def _files() -> Iterator[Path]:
    for folder in ("examples", "policies-example"):
        yield from sorted((ROOT / folder).rglob("*.yaml"))
    for vector_set in ("semantics", "semantics-2", "semantics-3"):
        base = SHARED / vector_set
        if base.is_dir():
            yield from sorted(base.rglob("*.yaml"))


def documents() -> list[tuple[str, dict[str, Any]]]:
    """Every Cilium policy of the fixtures the API server would store (its CRD schema holds:
    a document the schema refuses never reaches admission)."""
    found: list[tuple[str, Any]] = [*_lint_cases(), *_cluster_network_policies()]
    for path in _files():
        try:
            read = load_all(path.read_text(), str(path))
        except Exception:
            continue  # unreadable YAML: kubectl never sends it
        found += [(f"{path.relative_to(path.parents[2])}:{n}", d) for n, d in enumerate(read)]
    kept = []
    for name, document in found:
        if isinstance(document, Mapping) and _stored(document):
            kept.append((name, json.loads(json.dumps(document, default=str))))
    return kept


def _stored(document: Mapping[str, Any]) -> bool:
    """A document the API server would store: a Cilium policy its CRD's schema takes, or a
    NetworkPolicy its own validation takes."""
    if document.get("kind") in KINDS or is_cluster_network_policy(document):
        return not crd_schema_errors(document)
    if is_network_policy(document):
        return not network_policy_refusals(document)
    return False


DOCUMENTS = documents()


def environment(*names: str) -> Any:
    """CEL as the API server offers it to a policy: the standard library and Kubernetes'
    strings extension (indexOf, lastIndexOf, substring, …)."""
    from cel_expr_python.ext import ext_strings

    return cel.NewEnv(
        variables={name: cel.Type.DYN for name in names}, extensions=[ext_strings.ExtStrings()]
    )


class Guard:
    """The guard's variables and checks compiled once, evaluated as the API server does."""

    def __init__(
        self, version: tuple[int, int, int] = NEWEST, pod_cidrs: tuple[str, ...] = ()
    ) -> None:
        self.env = environment("object", "variables")
        self.variables = [(v.name, self.env.compile(v.expression)) for v in ADMISSION_VARIABLES]
        checks = admission_checks(version, pod_cidrs)
        self.checks = {c.code: self.env.compile(c.expression) for c in checks}
        self.size = self.env.compile(SIZE_CHECK.expression)

    def variables_of(self, document: Mapping[str, Any]) -> dict[str, Any]:
        """The policy's variables for ``document``, each reading those before it."""
        values: dict[str, Any] = {}
        for name, expression in self.variables:
            data = {"object": document, "variables": values}
            value = expression.eval(data=data)
            if value.type() == cel.Type.ERROR:  # every check reading it fails with it
                raise ValueError(f"variables.{name}: {value.plain_value()}")
            values[name] = value.plain_value()
        return values

    def checked(self, document: Mapping[str, Any]) -> bool:
        """Whether the policy is within the bounds the guard checks (its size check)."""
        data = {"object": document, "variables": self.variables_of(document)}
        result = self.size.eval(data=data).plain_value()
        assert isinstance(result, bool)
        return result

    def verdicts(self, document: Mapping[str, Any]) -> dict[str, bool]:
        data = {"object": document, "variables": self.variables_of(document)}
        out = {}
        for code, expression in self.checks.items():
            value = expression.eval(data=data)
            if code in REFUSED_BY_ERROR and value.type() == cel.Type.ERROR:
                out[code] = False  # under failurePolicy Fail, the binding's action takes it
                continue
            result = value.plain_value()
            assert isinstance(result, bool), f"{code}: {result!r}"
            out[code] = result
        return out


REFUSED_BY_ERROR = {"CPG022"}
"""The checks that refuse by failing (CEL can ask whether Go compiles a regular expression
only by compiling it); every other check evaluates to true or false on a stored document."""


GUARD = Guard()
GUARDS = {version: Guard(version) for version in SUPPORTED}
"""The guard for each release lint knows (the version rules differ)."""
POD_CIDRS = ("10.244.0.0/16", "fd00:10:244::/56")
POD_GUARD = Guard(pod_cidrs=POD_CIDRS)
"""The guard written for a cluster's pod CIDRs (CPG007)."""


def lint_codes(
    document: Mapping[str, Any],
    version: tuple[int, int, int] = NEWEST,
    pod_cidrs: tuple[str, ...] = (),
) -> set[str]:
    import yaml

    text = yaml.safe_dump(document, sort_keys=False)
    found = lint_text(
        text, "d.yaml", schema=crd_schema_errors, cilium_version=version, pod_cidrs=pod_cidrs
    )
    return {f.code for f in found}


@pytest.mark.parametrize(("name", "document"), DOCUMENTS, ids=[n for n, _ in DOCUMENTS])
def test_the_guard_for_a_clusters_pod_cidrs_agrees_with_lint(
    name: str, document: dict[str, Any]
) -> None:
    flagged = lint_codes(document, pod_cidrs=POD_CIDRS)
    verdicts = POD_GUARD.verdicts(document)
    assert verdicts["CPG007"] is ("CPG007" not in flagged)
    assert {c for c, ok in verdicts.items() if not ok} == {c for c in verdicts if c in flagged}


@pytest.mark.parametrize("version", SUPPORTED, ids=[".".join(map(str, v[:2])) for v in SUPPORTED])
@pytest.mark.parametrize(("name", "document"), DOCUMENTS, ids=[n for n, _ in DOCUMENTS])
def test_the_guard_agrees_with_lint(
    name: str, document: dict[str, Any], version: tuple[int, int, int]
) -> None:
    flagged = lint_codes(document, version)
    verdicts = GUARDS[version].verdicts(document)
    disagree = {
        code: ("lint flags it, the guard admits it" if code in flagged else "the guard refuses it")
        for code, admitted in verdicts.items()
        if admitted == (code in flagged)
    }
    assert disagree == {}


def test_every_rule_is_enforced_or_said_why_not() -> None:
    enforced = {c.code for v in SUPPORTED for c in admission_checks(v, POD_CIDRS)}
    left = {n.code for n in NOT_AT_ADMISSION}
    assert not enforced & left
    assert enforced | left == set(RULES)


def test_the_parity_covers_documents_that_break_each_enforced_rule() -> None:
    """Each enforced rule is seen refusing at least one document (a rule no fixture breaks
    would agree with lint by never firing)."""
    refused = {
        code
        for guard in GUARDS.values()
        for _n, d in DOCUMENTS
        for code, ok in guard.verdicts(d).items()
        if not ok
    }
    # CPG030 is about fields the newest CRD refuses (its documents are tested below)
    refused |= {c for _n, d in DOCUMENTS for c, ok in POD_GUARD.verdicts(d).items() if not ok}
    every = {c.code for v in SUPPORTED for c in admission_checks(v, POD_CIDRS)}
    assert refused | {"CPG030"} == every
    assert len(DOCUMENTS) > 150
    assert sum(1 for _n, d in DOCUMENTS if d["kind"] == "NetworkPolicy") >= 10
    assert sum(1 for _n, d in DOCUMENTS if d["kind"] == "ClusterNetworkPolicy") >= 2


def test_a_validation_takes_its_rule_only_where_the_bindings_configmap_names_it() -> None:
    """The policy's validations as the API server gets them: a rule refuses a document only
    through a binding whose ConfigMap names the rule."""
    from cpg_core.reports import admission_objects

    policy = admission_objects()[0]
    env = environment("object", "variables", "params")
    validations = {
        v["expression"].split()[1]: env.compile(v["expression"])
        for v in policy["spec"]["validations"]
    }
    assert set(validations) == {c.code for c in admission_checks()} | {"too-large:"}
    bad = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {
            "endpointSelector": {"matchExpressions": [{"key": "app", "operator": "In"}]},
            "ingress": [{"fromEntities": ["cluster"]}],
        },
    }
    variables = GUARD.variables_of(bad)

    def admitted(params: dict[str, Any]) -> bool:
        data = {"object": bad, "variables": variables, "params": params}
        return bool(validations["CPG016"].eval(data=data).plain_value())

    assert admitted({"data": {"CPG016": "selector-expression"}}) is False
    assert admitted({"data": {"CPG015": "empty-policy"}}) is True
    assert admitted({"metadata": {"name": "cpg-lint-audit"}}) is True  # a ConfigMap without data
    for validation in policy["spec"]["validations"][:-1]:
        message = validation["message"]
        assert "\n" not in message and len(message) <= 1024 and message.startswith("CPG")
        assert validation["expression"].startswith(f"// {message.split()[0]} ")


def test_lint_prints_the_guard(tmp_path: Path) -> None:
    from conftest import cpg
    from cpg_core.reports import admission_yaml

    ran = cpg("lint", "--admission-policy")
    assert ran.returncode == 0 and ran.stdout == admission_yaml()
    assert "Left to lint" in ran.stdout and "CPG040: needs every policy" in ran.stdout


def _odd_values() -> list[Any]:
    return ["x", 7, -1, 2.5, True, None, [], ["x"], {}, {"x": 1}, [[]], [{}], [{"x": [1]}]]


def _paths(node: Any, path: tuple[Any, ...] = ()) -> Iterator[tuple[Any, ...]]:
    yield path
    if isinstance(node, Mapping):
        for key, value in node.items():
            yield from _paths(value, (*path, key))
    elif isinstance(node, list):
        for n, value in enumerate(node):
            yield from _paths(value, (*path, n))


def _with(document: Any, path: tuple[Any, ...], value: Any) -> Any:
    copied = json.loads(json.dumps(document))
    if not path:
        return value
    node = copied
    for part in path[:-1]:
        node = node[part]
    node[path[-1]] = value
    return copied


HOSTILE_BASE: dict[str, Any] = {
    "apiVersion": "cilium.io/v2",
    "kind": "CiliumNetworkPolicy",
    "metadata": {"name": "api", "namespace": "shop"},
    "spec": {
        "endpointSelector": {
            "matchLabels": {"app": "api"},
            "matchExpressions": [{"key": "tier", "operator": "In", "values": ["a"]}],
        },
        "ingress": [
            {
                "fromEndpoints": [{"matchLabels": {"app": "web"}}],
                "toPorts": [{"ports": [{"port": "80", "protocol": "TCP"}]}],
            },
            {"fromCIDRSet": [{"cidr": "192.0.2.0/24", "except": ["192.0.2.0/28"]}]},
        ],
        "egress": [{"toFQDNs": [{"matchName": "a.example"}], "toServices": [{}]}],
    },
    "specs": [{"endpointSelector": {}, "egress": [{"toEntities": ["world"]}]}],
}


def test_hostile_documents_evaluate_or_are_refused_as_lint_refuses_them() -> None:
    """Every field of a policy given every odd type, lists of thousands and nesting as deep
    as the schema allows: each check either evaluates (to lint's verdict, where the schema
    holds) or errs on a document lint refuses too (the API server's schema refuses it before
    admission, and an error refuses it under failurePolicy Fail)."""
    hostile = []
    for path in _paths(HOSTILE_BASE):
        if path[:1] in ((), ("apiVersion",), ("kind",)):
            continue
        hostile += [_with(HOSTILE_BASE, path, value) for value in _odd_values()]
    rules = HOSTILE_BASE["spec"]["ingress"]
    hostile.append(_with(HOSTILE_BASE, ("spec", "ingress"), rules * 5000))
    hostile.append(
        _with(
            HOSTILE_BASE,
            ("spec", "endpointSelector", "matchLabels"),
            {f"k{n}": "v" for n in range(5000)},
        )
    )
    deep: Any = "x"
    for _ in range(60):
        deep = {"ingress": [deep]}
    hostile.append(
        _with(HOSTILE_BASE, ("spec", "ingress", 0, "fromEndpoints", 0, "matchLabels"), deep)
    )
    errors = agreed = too_large = 0
    for document in hostile:
        flagged = lint_codes(document)
        try:
            verdicts = GUARD.verdicts(document)
        except Exception:
            errors += 1
            levels = {RULES[code].level for code in flagged if code in RULES}
            assert "error" in levels, json.dumps(document)[:300]
            continue
        if not GUARD.checked(document):
            too_large += 1  # beyond the bounds: every check passes, the size check warns
            assert all(verdicts.values())
            continue
        if not crd_schema_errors(document):
            agreed += 1
            assert {c for c, ok in verdicts.items() if not ok} == {
                c for c in verdicts if c in flagged
            }, json.dumps(document)[:300]
    assert agreed > 10 and errors > 10 and too_large == 2 and len(hostile) > 400


def test_lint_on_the_cluster_says_what_the_guard_would_refuse(tmp_path: Path) -> None:
    """``cpg lint --cluster`` (read-only) names the stored policies the guard would refuse
    or warn about on their next update, so turning Deny on surprises no apply pipeline."""
    from conftest import cpg
    from fake_kube import fake_kube

    good = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {
            "endpointSelector": {"matchLabels": {"app": "api"}},
            "ingress": [{"fromEndpoints": [{"matchLabels": {"app": "web"}}]}],
        },
    }
    refused = json.loads(json.dumps(good))
    refused["metadata"]["name"] = "broken"
    refused["spec"]["endpointSelector"] = {"matchExpressions": [{"key": "app", "operator": "In"}]}
    warned = json.loads(json.dumps(good))
    warned["metadata"]["name"] = "open"
    warned["spec"]["ingress"] = [{"fromEndpoints": [{}]}]
    folder = tmp_path / "none"
    folder.mkdir()
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.policies = [good]
        clean = cpg("lint", str(folder), "--cluster", "--kubeconfig", str(kubeconfig))
        kube.policies = [good, refused, warned]
        ran = cpg("lint", str(folder), "--cluster", "--kubeconfig", str(kubeconfig))
    assert "would refuse none of the 1 Cilium policies" in clean.stdout
    assert "would refuse 1 of the 3 Cilium policies" in ran.stdout
    assert "shop/broken (CPG016)" in ran.stdout
    assert "would warn about 1 of the 3" in ran.stdout and "shop/open (CPG005)" in ran.stdout
    assert {m for m, _p in kube.requests} == {"GET"}


def test_the_guard_reads_a_port_as_cilium_does() -> None:
    """The port the guard computes from a port's text (Go's unsigned literal: a base prefix
    or a leading 0 for octal, underscores) is the one Cilium reads, on every shape."""
    import random

    from cpg_core._policy.admission_cel import _port_value
    from cpg_core._policy.port_text import cilium_port

    expression = environment("t").compile(_port_value("t"))
    texts = ["80", "0", "00", "0100", "0x50", "0o17", "0b101", "8_080", "65535", "65536"]
    texts += ["0xffff", "0x10000", "0177777", "0200000", "http", "089", "0x_5", "1__0", ""]
    texts += ["0b" + "1" * 16, "0b" + "1" * 17, "0" * 40 + "1", "9" * 20, "0x", "_1", "1_"]
    chosen = random.Random(7)
    texts += [
        "".join(chosen.choices("0123456789_xXoObBabcdefF", k=chosen.randint(1, 9)))
        for _ in range(2000)
    ]
    for text in texts:
        read = cilium_port(text)
        assert expression.eval(data={"t": text}).plain_value() == (-1 if read is None else read), (
            text
        )


def test_deprecated_fields_an_older_crd_stores_are_refused_as_lint_refuses_them() -> None:
    """fromRequires (deprecated from 1.19, refused by 1.20's CRD) and Kafka rules (before
    1.20): documents an older release's CRD stores, so the guard for that release sees them."""
    requires = dict(_lint_cases())["lint-case:CPG030:bad"]
    kafka = json.loads(json.dumps(requires))
    rule = kafka["spec"]["ingress"][0]
    del rule["fromRequires"]
    rule["toPorts"] = [
        {"ports": [{"port": "9092", "protocol": "TCP"}], "rules": {"kafka": [{"topic": "t"}]}}
    ]
    for document in (requires, kafka):
        for version in SUPPORTED:
            flagged = "CPG030" in lint_codes(document, version)
            verdicts = GUARDS[version].verdicts(document)
            assert verdicts.get("CPG030", True) is not flagged, (version, document["spec"])
    assert "CPG030" in lint_codes(requires, (1, 19, 0)) and "CPG030" in lint_codes(
        kafka, (1, 19, 0)
    )


def test_the_guard_for_an_older_release_takes_its_version_rules() -> None:
    from conftest import cpg

    older = cpg("lint", "--admission-policy", "--cilium-version", "1.18")
    newest = cpg("lint", "--admission-policy")
    assert older.returncode == 0 and "for Cilium 1.18" in older.stdout
    assert "CPG031" in older.stdout and "CPG033" in older.stdout
    assert "CPG031" not in newest.stdout.split("Left to lint")[0]
    bad = cpg("lint", "--admission-policy", "--cilium-version", "2.0")
    assert bad.returncode == 2 and "--cilium-version" in bad.stderr


def test_the_guard_reads_a_cidr_as_cilium_does() -> None:
    """Whether one CIDR holds another, as the guard works it out (IPv6 ``::`` and dotted
    tails expanded, 16-bit groups compared to the prefix), is ipaddress's answer, on every
    shape: both families, every prefix length, compressed and exploded texts."""
    import ipaddress
    import random

    from cpg_core._policy.admission_cel import _cidr_contains, _cidr_normalized, _cidr_parsed

    env = environment("o", "i")
    normalize = env.compile(_cidr_normalized("o"))
    parse = env.compile(_cidr_parsed("o"))
    holds = env.compile(_cidr_contains("o", "i"))

    def read(text: str) -> Any:
        normal = normalize.eval(data={"o": text}).plain_value()
        return parse.eval(data={"o": normal}).plain_value()

    chosen = random.Random(11)
    pairs = [
        ("2001:db8::/32", "2001:db8:1::/48"),
        ("::ffff:192.0.2.0/120", "::ffff:192.0.2.128/121"),
        ("10.0.0.0/8", "fd00::/8"),
        ("::/0", "::1/128"),
        ("::1.2.3.0/120", "::1.2.3.4/128"),
        ("1::/16", "1::/16"),
    ]
    for _ in range(1500):
        six = chosen.random() < 0.6
        bits = 128 if six else 32
        address = chosen.getrandbits(bits) & ~((1 << chosen.randint(0, bits - 1)) - 1)
        network = ipaddress.IPv6Network if six else ipaddress.IPv4Network
        outer = network((address, chosen.randint(0, bits)), strict=False)
        inner_address = outer.network_address + chosen.randint(
            0, min(outer.num_addresses - 1, 2**40)
        )
        text = inner_address.exploded if six and chosen.random() < 0.2 else str(inner_address)
        pairs.append((str(outer), f"{text}/{chosen.randint(0, bits)}"))
    for outer_text, inner_text in pairs:
        outer, inner = (ipaddress.ip_network(t, strict=False) for t in (outer_text, inner_text))
        expected = (
            outer.version == inner.version
            and inner.prefixlen >= outer.prefixlen
            and inner.network_address in outer
        )
        got = holds.eval(data={"o": read(outer_text), "i": read(inner_text)}).plain_value()
        assert got is expected, (outer_text, inner_text)


def test_the_size_lint_reads_is_the_one_the_guard_counts() -> None:
    """``cpg lint --cluster`` tells a policy past the guard's bounds by counting in Python;
    the count says what the guard's variables say, on every document and past each bound."""
    from cpg_core._policy.admission_cel import within_bounds

    big = [
        _with(HOSTILE_BASE, ("spec", "ingress"), HOSTILE_BASE["spec"]["ingress"] * n)
        for n in (1, 15, 16, 17, 400, 600)
    ]
    big += [
        _with(HOSTILE_BASE, ("spec", "egress", 0, "toCIDR"), ["192.0.2.0/24"] * n)
        for n in (190, 197, 198, 250)
    ]
    for document in [d for _n, d in DOCUMENTS] + big:
        values = GUARD.variables_of(document)
        kinds = ("CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy")
        if document["kind"] in kinds:
            assert within_bounds(document) == (values["checkable"], values["pairable"])
    assert {within_bounds(d) for d in big} == {(True, True), (True, False), (False, False)}


def test_lint_on_the_cluster_names_a_policy_past_the_guards_bounds() -> None:
    """A stored policy the guard would not check (past its bounds) is named with the size
    check, not with the rules lint finds in it: the guard warns, it does not refuse."""
    from cpg_core.reports import guard_notes

    big = _with(HOSTILE_BASE, ("spec", "ingress"), [{"fromEntities": ["world"]}] * 1001)
    notes = guard_notes([big])
    assert notes == (
        "the admission guard, as shipped, would warn about 1 of the 1 Cilium policies stored "
        "in the cluster on their next update: shop/api (too-large)",
    )
