"""The Argo CD health check for Cilium's policy kinds (deploy/argocd/), run in a real Lua
runtime (lupa's LuaJIT/Lua) as Argo CD runs it: ``obj`` is the live object, the script
returns ``hs`` with a status and a message."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "deploy" / "argocd" / "health-cilium-policy.lua"
CONFIGMAP = ROOT / "deploy" / "argocd" / "argocd-cm.yaml"
KINDS = ("CiliumNetworkPolicy", "CiliumClusterwideNetworkPolicy")


def health(script: str, obj: dict[str, Any]) -> dict[str, str]:
    from lupa import LuaRuntime

    lua = LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    result = lua.execute(script)
    return {str(k): str(v) for k, v in result.items()}


def policy(**status: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {"endpointSelector": {"matchLabels": {"app": "api"}}, "ingress": [{}]},
    }
    if status:
        obj["status"] = status
    return obj


def test_the_configmap_carries_the_script_for_both_kinds() -> None:
    config = yaml.safe_load(CONFIGMAP.read_text())
    assert config["kind"] == "ConfigMap" and config["metadata"]["name"] == "argocd-cm"
    for kind in KINDS:
        assert config["data"][f"resource.customizations.health.cilium.io_{kind}"] == (
            SCRIPT.read_text()
        )


@pytest.mark.parametrize("kind", KINDS)
def test_valid_false_is_degraded_with_the_operators_message(kind: str) -> None:
    script = yaml.safe_load(CONFIGMAP.read_text())["data"][
        f"resource.customizations.health.cilium.io_{kind}"
    ]
    message = "Invalid CiliumNetworkPolicy spec: combining ToEndpoints and ToCIDR"
    obj = policy(
        conditions=[
            {"type": "Other", "status": "True"},
            {"type": "Valid", "status": "False", "message": message},
        ]
    )
    obj["kind"] = kind
    assert health(script, obj) == {"status": "Degraded", "message": message}


def test_valid_true_unknown_and_no_status() -> None:
    script = SCRIPT.read_text()
    ok = health(script, policy(conditions=[{"type": "Valid", "status": "True"}]))
    assert ok["status"] == "Healthy"
    pending = health(script, policy(conditions=[{"type": "Valid", "status": "Unknown"}]))
    assert pending["status"] == "Progressing"
    assert health(script, policy())["status"] == "Healthy"
    assert "no validation" in health(script, policy(conditions=[]))["message"]
    bare = health(script, policy(conditions=[{"type": "Valid", "status": "False"}]))
    assert bare == {"status": "Degraded", "message": "Cilium marked the policy Valid=False"}
