"""The CRD schema cpg ships, and the check every test's written policies go through."""

from __future__ import annotations

import json
from typing import Any

import pytest
import yaml

from conftest import CRD_PATH, SCHEMA_PATH, crd_errors


def _without_descriptions(node: Any) -> Any:
    """The schema without its prose: a ``description`` that is a text is dropped, a field
    named ``description`` (the rule's own, under ``properties``) is kept."""
    if isinstance(node, dict):
        return {
            k: _without_descriptions(v)
            for k, v in node.items()
            if not (k == "description" and isinstance(v, str))
        }
    if isinstance(node, list):
        return [_without_descriptions(item) for item in node]
    return node


def test_the_shipped_schema_is_the_crds_v2_schema() -> None:
    if not CRD_PATH.exists():
        pytest.skip("../shared/schemas is absent: nothing to compare the shipped copy with")
    crd = yaml.safe_load(CRD_PATH.read_text())
    (v2,) = [v for v in crd["spec"]["versions"] if v["name"] == "v2"]
    expected = _without_descriptions(v2["schema"]["openAPIV3Schema"])
    assert json.loads(SCHEMA_PATH.read_text()) == expected


def policy(peer_labels: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "cpg-cart", "namespace": "shop"},
        "spec": {
            "endpointSelector": {"matchLabels": {"app": "cart"}},
            "ingress": [{"fromEndpoints": [{"matchLabels": peer_labels}]}],
        },
    }


def test_the_check_catches_what_cilium_and_kubernetes_refuse() -> None:
    assert crd_errors(policy({"app": "frontend", "k8s:io.kubernetes.pod.namespace": "web"})) == []
    (label,) = crd_errors(policy({"app": "front\n"}))
    assert "not a label value" in label and "ingress[0].fromEndpoints[0]" in label
    assert crd_errors(policy({"bad key!": "x"}))
    wrong_shape = policy({"app": "frontend"})
    wrong_shape["spec"]["ingress"][0]["toPorts"] = [{"ports": [{"port": 8080}]}]
    assert any("toPorts" in e for e in crd_errors(wrong_shape))  # port must be a string
