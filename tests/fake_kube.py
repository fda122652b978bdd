"""A fake Kubernetes API server on 127.0.0.1 that serves Cilium policy lists (read-only)."""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import yaml

_PODS = re.compile(r"^/api/v1/namespaces/([^/]+)/pods$")
_NAMESPACED = re.compile(r"^/apis/cilium\.io/v2/namespaces/([^/]+)/ciliumnetworkpolicies$")


_IDENTITY_PATHS = {
    "/apis/cilium.io/v2/ciliumendpoints": "CiliumEndpoint",
    "/apis/cilium.io/v2/ciliumidentities": "CiliumIdentity",
    "/api/v1/pods": "Pod",
}


def _declared_paths() -> dict[str, str]:
    from cpg_io.kube import DECLARATION_LISTS

    return {
        (f"/apis/{group}/{version}/{plural}" if group else f"/api/{version}/{plural}"): kind
        for group, version, plural, kind, _namespaced in DECLARATION_LISTS
    }


CILIUM_CONFIG = "/api/v1/namespaces/kube-system/configmaps/cilium-config"


class FakeKube:
    def __init__(self) -> None:
        self.policies: list[dict[str, Any]] = []
        self.agents: list[str] | None = None
        """Images of the Cilium agents in kube-system (None: the pod list is not served)."""
        self.pods: dict[str, list[dict[str, str]]] = {}
        """The labels of the pods of each namespace (outside kube-system's agents)."""
        self.status = 200
        self.requests: list[tuple[str, str]] = []
        self.identity_objects: list[dict[str, Any]] | None = None
        """CiliumEndpoints, CiliumIdentities and pods of every namespace (None: not served)."""
        self.authorization: list[str] = []
        """The Authorization header of each request."""
        self.raw: bytes | None = None
        """An answer sent as it is to every list (a hostile or broken API server)."""
        self.hang = threading.Event()
        """Set: every request is accepted and never answered (until the server stops)."""
        self.stopping = threading.Event()
        self.declared: list[dict[str, Any]] | None = None
        """The objects that declare dependencies, each served by its kind's list (None: not
        served, 404 as a cluster without those kinds)."""
        self.forbidden: set[str] = set()
        """Paths answered 403 (a ClusterRole without them)."""
        self.cilium_config: dict[str, str] | None = None
        """The data of kube-system/cilium-config (None: not served, 404)."""

    def items(self, path: str) -> list[dict[str, Any]] | None:
        declared = _declared_paths().get(path)
        if declared is not None and self.declared is not None:
            # as the API serves them: list items carry no kind
            return [
                {k: v for k, v in o.items() if k != "kind"}
                for o in self.declared
                if o.get("kind") == declared
            ]
        served = _IDENTITY_PATHS.get(path)
        if served is not None and self.identity_objects is not None:
            return [o for o in self.identity_objects if o.get("kind") == served]
        if path == "/apis/cilium.io/v2/ciliumnetworkpolicies":
            return [p for p in self.policies if p.get("kind") == "CiliumNetworkPolicy"]
        if path == "/apis/cilium.io/v2/ciliumclusterwidenetworkpolicies":
            return [p for p in self.policies if p.get("kind") == "CiliumClusterwideNetworkPolicy"]
        if path == "/apis/networking.k8s.io/v1/networkpolicies":
            # as the API serves them: list items carry neither kind nor apiVersion
            return [
                {k: v for k, v in p.items() if k not in ("kind", "apiVersion")}
                for p in self.policies
                if p.get("kind") == "NetworkPolicy"
            ]
        if path == "/apis/policy.networking.k8s.io/v1alpha2/clusternetworkpolicies":
            found = [p for p in self.policies if p.get("kind") == "ClusterNetworkPolicy"]
            return found or None  # no such CRD installed: 404, as a cluster without it
        if path == "/api/v1/namespaces/kube-system/pods" and self.agents is not None:
            return [
                {
                    "metadata": {"name": f"cilium-{n}", "namespace": "kube-system"},
                    "spec": {"containers": [{"name": "cilium-agent", "image": image}]},
                    "status": {"phase": "Running"},
                }
                for n, image in enumerate(self.agents)
            ]
        pods = _PODS.match(path)
        if pods and pods.group(1) in self.pods:
            return [
                {"metadata": {"name": f"pod-{n}", "namespace": pods.group(1), "labels": labels}}
                for n, labels in enumerate(self.pods[pods.group(1)])
            ]
        match = _NAMESPACED.match(path)
        if match:
            return [
                p
                for p in self.policies
                if p.get("kind") == "CiliumNetworkPolicy"
                and p["metadata"].get("namespace") == match.group(1)
            ]
        return None


@contextmanager
def fake_kube(
    tmp_path: Path, tls: tuple[Path, Path] | None = None
) -> Iterator[tuple[FakeKube, Path]]:
    """Start the server (over TLS with ``tls``: key and certificate); yield it and a
    kubeconfig file that points at it."""
    state = FakeKube()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            path = self.path.split("?", 1)[0]
            state.requests.append((self.command, self.path))
            state.authorization.append(self.headers.get("Authorization", ""))
            if state.hang.is_set():
                state.stopping.wait()
                return
            if state.raw is not None:
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(state.raw)))
                self.end_headers()
                self.wfile.write(state.raw)
                return
            items = state.items(path)
            if path == CILIUM_CONFIG and path not in state.forbidden:
                if state.cilium_config is None:
                    self._send(404, {"kind": "Status", "code": 404})
                else:
                    config = {"kind": "ConfigMap", "apiVersion": "v1", "data": state.cilium_config}
                    self._send(200, {**config, "metadata": {"name": "cilium-config"}})
                return
            if path in state.forbidden:
                self._send(403, {"kind": "Status", "code": 403, "reason": "Forbidden"})
            elif state.status != 200:
                self._send(
                    state.status, {"kind": "Status", "code": state.status, "reason": "Forbidden"}
                )
            elif items is None:
                self._send(404, {"kind": "Status", "code": 404})
            else:
                self._send(200, {"apiVersion": "cilium.io/v2", "kind": "List", "items": items})

        def _send(self, status: int, body: dict[str, Any]) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    if tls is not None:
        import ssl

        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(certfile=str(tls[1]), keyfile=str(tls[0]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "fake",
                        "cluster": {"server": f"http://127.0.0.1:{server.server_port}"},
                    }
                ],
                "users": [{"name": "reader", "user": {"token": "not-a-secret"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "reader"}}],
                "current-context": "fake",
            }
        )
    )
    try:
        yield state, kubeconfig
    finally:
        state.stopping.set()
        server.shutdown()
        server.server_close()
