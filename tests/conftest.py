"""Shared test helpers: paths to ../shared, the CRD validator, and a flow factory."""

from __future__ import annotations

import functools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
SHARED = ROOT.parent / "shared"
CRD_PATH = SHARED / "schemas" / "ciliumnetworkpolicies.yaml"
CORPUS = SHARED / "corpus"
EXAMPLE = ROOT / "examples" / "drops.jsonl"


@functools.cache
def _crd_validator() -> Any:
    import jsonschema

    crd = yaml.safe_load(CRD_PATH.read_text())
    version = next(v for v in crd["spec"]["versions"] if v["name"] == "v2")
    schema = version["schema"]["openAPIV3Schema"]
    return jsonschema.Draft7Validator(schema)


def crd_errors(document: Any) -> list[str]:
    """Schema violations of one CiliumNetworkPolicy document (empty when valid)."""
    return [f"{list(e.absolute_path)}: {e.message}" for e in _crd_validator().iter_errors(document)]


def assert_crd_valid(text: str, *, required: bool = False) -> None:
    """Validate against the CRD schema. Without ../shared, a test about the schema itself
    (``required``) is skipped; any other test checks the rest of what it asserts."""
    if not CRD_PATH.exists():
        if required:
            pytest.skip("../shared/schemas is absent: CRD validation skipped")
        return
    document = yaml.safe_load(text)
    assert document["apiVersion"] == "cilium.io/v2"
    assert document["kind"] == "CiliumNetworkPolicy"
    errors = crd_errors(document)
    assert not errors, "\n".join(errors)


@pytest.fixture(autouse=True)
def _private_cache(
    tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Evidence written by tests (and by cpg subprocesses) never lands in the real cache."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path_factory.mktemp("xdg-cache")))
    # No test reaches a real cluster through the machine's kubeconfig; tests that want one
    # point KUBECONFIG at a fake.
    monkeypatch.setenv("KUBECONFIG", str(tmp_path_factory.mktemp("no-kube") / "config"))


@pytest.fixture(autouse=True)
def _validate_written_policies(request: pytest.FixtureRequest) -> Iterator[None]:
    """Every policy YAML a test leaves in its tmp_path must validate against the CRD."""
    if "tmp_path" not in request.fixturenames or not CRD_PATH.exists():
        yield
        return
    tmp_path: Path = request.getfixturevalue("tmp_path")
    yield
    for path in tmp_path.rglob("*.yaml"):
        if path.name.startswith("not-a-policy"):
            continue
        document = yaml.safe_load(path.read_text())
        if isinstance(document, dict) and document.get("kind") == "CiliumNetworkPolicy":
            errors = crd_errors(document)
            assert not errors, f"{path}: " + "\n".join(errors)


def endpoint(
    ns: str | None = None, app: str | None = None, *labels: str, **extra: Any
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if ns is not None:
        out["namespace"] = ns
    all_labels = [f"k8s:app={app}"] if app is not None else []
    if ns is not None and app is not None:
        all_labels.append(f"k8s:io.kubernetes.pod.namespace={ns}")
    all_labels += list(labels)
    if all_labels:
        out["labels"] = all_labels
    out.update(extra)
    return out


WORLD = {"identity": 2, "labels": ["reserved:world"]}


def flow_dict(
    src: dict[str, Any] | None = None,
    dst: dict[str, Any] | None = None,
    *,
    direction: str = "INGRESS",
    verdict: str = "DROPPED",
    reason: str | None = "POLICY_DENIED",
    tcp: int | None = 8080,
    udp: int | None = None,
    icmp4: int | None = None,
    icmp6: int | None = None,
    sctp: int | None = None,
    src_ip: str = "10.0.0.1",
    dst_ip: str = "10.0.0.2",
    reply: bool | None = False,
    time: str = "2026-11-02T10:00:00Z",
    **extra: Any,
) -> dict[str, Any]:
    """A ``{"flow": ...}`` record as ``hubble observe -o jsonpb`` writes it."""
    body: dict[str, Any] = {"time": time, "verdict": verdict}
    body["IP"] = {"source": src_ip, "destination": dst_ip}
    if udp is not None:
        body["l4"] = {"UDP": {"source_port": 40000, "destination_port": udp}}
    elif icmp4 is not None:
        body["l4"] = {"ICMPv4": {"type": icmp4}}
    elif icmp6 is not None:
        body["l4"] = {"ICMPv6": {"type": icmp6}}
    elif sctp is not None:
        body["l4"] = {"SCTP": {"source_port": 40000, "destination_port": sctp}}
    elif tcp is not None:
        body["l4"] = {
            "TCP": {"source_port": 40000, "destination_port": tcp, "flags": {"SYN": True}}
        }
    body["source"] = src if src is not None else endpoint("shop", "frontend")
    body["destination"] = dst if dst is not None else endpoint("shop", "cart")
    body["traffic_direction"] = direction
    if reason is not None:
        body["drop_reason_desc"] = reason
    if reply is not None:
        body["is_reply"] = reply
    body.update(extra)
    return {"flow": body}


def jsonl(records: list[dict[str, Any]]) -> str:
    return "".join(json.dumps(r) + "\n" for r in records)
