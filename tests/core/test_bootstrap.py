from __future__ import annotations

import pytest
import yaml

from conftest import assert_crd_valid, cpg
from cpg_core._synthesis.bootstrap import render_bootstrap


def test_default_deny_policy_shape() -> None:
    text = render_bootstrap("shop")
    doc = yaml.safe_load(text)
    assert doc["metadata"]["name"] == "default-deny-shop"
    assert doc["metadata"]["namespace"] == "shop"
    assert doc["spec"]["endpointSelector"] == {}
    assert doc["spec"]["enableDefaultDeny"] == {"ingress": True, "egress": True}
    assert doc["spec"]["ingress"] == [{}] and doc["spec"]["egress"] == [{}]
    assert "- {}" in text and "ingress: []" not in text and "egress: []" not in text
    assert_crd_valid(text, required=True)


@pytest.mark.parametrize("bad", ["Foo Bar", "../etc", "UPPER", "trailing-", "", "a" * 64])
def test_invalid_namespaces_are_refused(bad: str) -> None:
    with pytest.raises(ValueError, match="not a valid namespace"):
        render_bootstrap(bad)


def test_cli() -> None:
    ok = cpg("bootstrap", "-n", "shop")
    assert ok.returncode == 0 and ok.stdout == render_bootstrap("shop")
    bad = cpg("bootstrap", "-n", "../etc")
    assert bad.returncode == 2 and "not a valid namespace" in bad.stderr
    assert cpg("bootstrap").returncode == 2
