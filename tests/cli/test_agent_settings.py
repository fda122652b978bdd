"""The agents' settings as one value (§D61): given as flags, read from the cluster's
``cilium-config``, and what they change in a verdict: host policies under the host
firewall (a node label selector, both sides of a pod ↔ host flow), dual stack, the API
server that is a remote node too, ICMP spelled as policies spell it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from conftest import cpg
from cpg_core.cilium import AgentChoice, AgentSettings, agent_settings

HOST_POLICIES: list[dict[str, Any]] = [
    {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumClusterwideNetworkPolicy",
        "metadata": {"name": "nodes-ssh"},
        "spec": {
            "nodeSelector": {},
            "ingress": [
                {
                    "fromCIDR": ["192.0.2.0/24"],
                    "toPorts": [{"ports": [{"port": "22", "protocol": "TCP"}]}],
                },
                {"fromEntities": ["cluster"], "icmps": [{"fields": [{"type": 8}]}]},
            ],
        },
    },
    {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumClusterwideNetworkPolicy",
        "metadata": {"name": "control-plane-api"},
        "spec": {
            "nodeSelector": {"matchLabels": {"node-role.kubernetes.io/control-plane": ""}},
            "ingress": [
                {
                    "fromEntities": ["world"],
                    "toPorts": [{"ports": [{"port": "6443", "protocol": "TCP"}]}],
                }
            ],
        },
    },
    {
        "apiVersion": "cilium.io/v2",
        "kind": "CiliumNetworkPolicy",
        "metadata": {"name": "api", "namespace": "shop"},
        "spec": {
            "endpointSelector": {"matchLabels": {"app": "api"}},
            "ingress": [{"fromEntities": ["remote-node"]}],
            "egress": [{"toCIDR": ["0.0.0.0/0"]}],
        },
    },
]


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    out = tmp_path / "policies"
    out.mkdir()
    (out / "policies.yaml").write_text(yaml.safe_dump_all(HOST_POLICIES, sort_keys=False))
    return out


def trace(folder: Path, *args: str) -> tuple[int, list[dict[str, Any]]]:
    ran = cpg("trace", "-d", str(folder), "-o", "json", *args)
    assert ran.returncode in (0, 3), ran.stderr
    return ran.returncode, json.loads(ran.stdout)["answers"]


def test_the_node_is_a_subject_only_with_the_host_firewall(folder: Path) -> None:
    code, (answer,) = trace(folder, "--from", "8.8.8.8", "--to", "host", "--port", "22/TCP")
    assert code == 0 and answer["allowed"] and not answer["policed_by"]
    assert "without the host firewall" in answer["answer"] and "nodes-ssh" in answer["answer"]
    code, (answer,) = trace(
        folder, "--from", "8.8.8.8", "--to", "host", "--port", "22/TCP", "--host-firewall", "true"
    )
    assert code == 3 and answer["policed_by"] == ["nodes-ssh"]
    code, _ = trace(
        folder, "--from", "192.0.2.9", "--to", "host", "--port", "22/TCP", "--host-firewall=true"
    )
    assert code == 0


def test_a_node_label_selector_selects_by_the_labels_given(folder: Path) -> None:
    ask = ["--from", "8.8.8.8", "--to", "host", "--port", "6443/TCP", "--host-firewall", "true"]
    code, (plain,) = trace(folder, *ask)
    assert code == 3 and plain["policed_by"] == ["nodes-ssh"]
    code, (labelled,) = trace(
        folder, *ask, "--node-label", "node-role.kubernetes.io/control-plane="
    )
    assert code == 0 and labelled["subject"] == "host"
    assert sorted(labelled["policed_by"]) == ["control-plane-api", "nodes-ssh"]
    assert "control-plane-api ingress[0]" in labelled["allowed_by"]
    bad = cpg("trace", "-d", str(folder), *ask, "--node-label", "role")
    assert bad.returncode == 2 and "--node-label" in bad.stderr and "KEY=VALUE" in bad.stderr


def test_both_sides_of_a_pod_to_host_flow_are_answered(folder: Path) -> None:
    """Egress at the pod (its policy allows the world only by CIDR: the node is no CIDR)
    and ingress at the node, ICMP spelled as a policy spells it."""
    code, answers = trace(
        folder, "--from", "shop/api", "--to", "host", "--port", "8/ICMP", "--host-firewall", "true"
    )
    by_side = {a["direction"]: a for a in answers}
    assert set(by_side) == {"egress", "ingress"}
    assert by_side["ingress"]["subject"] == "host" and by_side["ingress"]["allowed"]
    assert not by_side["egress"]["allowed"] and code == 3
    assert "ICMPv4/8" in by_side["ingress"]["traffic"]


def test_the_api_server_is_a_remote_node_too(folder: Path) -> None:
    code, (answer,) = trace(folder, "--from", "kube-apiserver", "--to", "shop/api", "--port", "443")
    assert code == 0 and answer["allowed_by"] == "allowed by shop/api ingress[0]"
    code, _ = trace(folder, "--from", "health", "--to", "shop/api", "--port", "443")
    assert code == 3  # the rule admits remote nodes, and the API server as one of them


def test_dual_stack_world_identities(folder: Path) -> None:
    """0.0.0.0/0 selects an IPv4 world address in both modes (as world-ipv4 under dual
    stack): the answers agree; a bare world peer is selected in single stack only."""
    for mode in ("false", "true"):
        code, _ = trace(
            folder, "--from", "shop/api", "--to", "8.8.8.8", "--port", "443", "--dual-stack", mode
        )
        assert code == 0, mode
    code, _ = trace(folder, "--from", "shop/api", "--to", "world", "--port", "443")
    assert code == 0
    code, _ = trace(
        folder, "--from", "shop/api", "--to", "world", "--port", "443", "--dual-stack", "true"
    )
    assert code == 3


def test_bad_agent_setting_words_name_the_flag(folder: Path) -> None:
    ran = cpg(
        "trace",
        "-d",
        str(folder),
        "--from",
        "a/b",
        "--to",
        "c/d",
        "--port",
        "1",
        "--host-firewall",
        "maybe",
    )
    assert ran.returncode == 2 and "--host-firewall" in ran.stderr and "auto" in ran.stderr


def test_settings_come_from_the_cluster_when_not_given(folder: Path, tmp_path: Path) -> None:
    from fake_kube import fake_kube

    ask = ["--from", "8.8.8.8", "--to", "host", "--port", "22/TCP"]
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.policies = HOST_POLICIES
        kube.agents = ["quay.io/cilium/cilium:v1.19.2"]
        cluster = ["trace", *ask, "--cluster", "--kubeconfig", str(kubeconfig), "-o", "json"]
        unread = cpg(*cluster)
        assert unread.returncode == 0 and "cilium-config" in unread.stderr
        kube.cilium_config = {"enable-host-firewall": "true", "enable-ipv6": "true"}
        read = cpg(*cluster)
        assert read.returncode == 3 and "cilium-config" not in read.stderr
        (answer,) = json.loads(read.stdout)["answers"]
        assert answer["policed_by"] == ["nodes-ssh"]
        given = cpg(*cluster, "--host-firewall", "false")  # what is given wins
        assert given.returncode == 0
        assert ("GET", "/api/v1/namespaces/kube-system/configmaps/cilium-config") in [
            (m, p.split("?")[0]) for m, p in kube.requests
        ]
        assert {m for m, _p in kube.requests} == {"GET"}


def test_agent_settings_resolution() -> None:
    config = {
        "allow-localhost": "policy",
        "policy-default-local-cluster": "false",
        "enable-host-firewall": "true",
        "enable-ipv4": "true",
        "enable-ipv6": "true",
        "bpf-policy-map-max": "65536",
    }
    read, notes = agent_settings(AgentChoice(), config, ["x/cilium:v1.18.3"], from_cluster=True)
    assert notes == ()
    assert read == AgentSettings(
        allow_localhost=False,
        default_local_cluster=False,
        host_firewall=True,
        dual_stack=True,
        policy_map_max=65536,
        version="1.18.3",
    )
    given = AgentChoice(
        allow_localhost=True, host_firewall=False, dual_stack=False, policy_map_max=9
    )
    mine, _ = agent_settings(given, config, (), from_cluster=True)
    assert (mine.allow_localhost, mine.host_firewall, mine.dual_stack, mine.policy_map_max) == (
        True,
        False,
        False,
        9,
    )
    defaults, notes = agent_settings(AgentChoice(), None, (), from_cluster=True)
    assert defaults == AgentSettings() and any("cilium-config" in n for n in notes)
    assert agent_settings(AgentChoice(), None, ())[0] == AgentSettings()
    single, _ = agent_settings(AgentChoice(), {"enable-ipv6": "false"}, ())
    assert not single.dual_stack
    bad, _ = agent_settings(AgentChoice(), {"bpf-policy-map-max": "-1", "allow-localhost": "?"}, ())
    assert bad.policy_map_max == 16_384 and bad.allow_localhost


def test_plan_notes_an_ipblock_only_peer_for_an_agent_before_the_fix(tmp_path: Path) -> None:
    """The verdicts follow the fixed reading (that CIDR only); on a cluster whose agents
    predate it, plan says what those agents admit besides."""
    from conftest import flow_dict, jsonl
    from fake_kube import fake_kube

    netpol = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "office", "namespace": "shop"},
        "spec": {
            "podSelector": {"matchLabels": {"app": "api"}},
            "ingress": [{"from": [{"ipBlock": {"cidr": "192.0.2.0/24"}}]}],
        },
    }
    capture = tmp_path / "c.jsonl"
    capture.write_text(jsonl([flow_dict()]))
    (tmp_path / "proposal").mkdir()
    notes = {}
    with fake_kube(tmp_path) as (kube, kubeconfig):
        kube.policies = [netpol]
        for version in ("v1.19.2", "v1.20.0"):
            kube.agents = [f"quay.io/cilium/cilium:{version}"]
            ran = cpg(
                "plan",
                str(capture),
                "-d",
                str(tmp_path / "proposal"),
                "--cluster",
                "--kubeconfig",
                str(kubeconfig),
                "-o",
                "json",
            )
            assert ran.returncode in (0, 3, 4), ran.stderr  # 4: no forwarded flow to judge
            notes[version] = " ".join(json.loads(ran.stdout)["notes"]) + ran.stderr
    assert "shop/office" in notes["v1.19.2"] and "cilium/cilium#46305" in notes["v1.19.2"]
    assert "46305" not in notes["v1.20.0"]


@pytest.mark.parametrize(("firewall", "allowed"), [(None, True), (False, True), (True, False)])
def test_an_mcp_sessions_checks_take_its_agent_settings(
    folder: Path, tmp_path: Path, firewall: bool | None, allowed: bool
) -> None:
    """cpg-mcp: start_session's host_firewall is what the session's trace_flow judges with
    (null: as the cluster says, else off), and trace_flow's node_labels select the node."""
    from cpg_mcp import tools
    from cpg_mcp.sessions import Session

    session = Session(id="s", tmp=folder.parent, source="x", stopped=1.0, host_firewall=firewall)
    ask = {"source": "8.8.8.8", "destination": "host", "port": "6443/TCP"}
    (answer,) = tools.trace_flow(session, **ask).answers
    assert answer["allowed"] is allowed
    labelled = tools.trace_flow(
        session, **ask, node_labels=["node-role.kubernetes.io/control-plane="]
    )
    assert labelled.answers[0]["allowed"] is True


def test_the_cilium_version_given_decides_as_the_agents_would(tmp_path: Path) -> None:
    """--cilium-version without a cluster: the ipBlock note for a release before the fix,
    and the local-cluster default of ClusterMesh selectors before 1.19."""
    netpol = {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": "office", "namespace": "shop"},
        "spec": {
            "podSelector": {"matchLabels": {"app": "api"}},
            "ingress": [{"from": [{"ipBlock": {"cidr": "192.0.2.0/24"}}]}],
        },
    }
    folder = tmp_path / "p"
    folder.mkdir()
    (folder / "office.yaml").write_text(yaml.safe_dump(netpol))
    ask = ["trace", "-d", str(folder), "--from", "192.0.2.1", "--to", "shop/api", "--port", "80"]
    old = cpg(*ask, "--cilium-version", "1.19")
    assert old.returncode == 0 and "cilium/cilium#46305" in old.stderr
    new = cpg(*ask, "--cilium-version", "v1.20.1")
    assert new.returncode == 0 and "46305" not in new.stderr
    bad = cpg(*ask, "--cilium-version", "latest")
    assert bad.returncode == 2 and "--cilium-version" in bad.stderr
    old_mesh, _ = agent_settings(AgentChoice(version=(1, 18, 6)))
    assert not old_mesh.default_local_cluster and old_mesh.version == "1.18.6"
    assert agent_settings(AgentChoice(version=(1, 19, 0)))[0].default_local_cluster
