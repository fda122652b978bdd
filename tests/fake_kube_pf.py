"""A fake Kubernetes API server on 127.0.0.1 for the auto port-forward path: pod listing, and
the pods/portforward websocket (v4.channel.k8s.io) bridged to a local TCP port."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml
from websockets.asyncio.server import ServerConnection, serve
from websockets.datastructures import Headers
from websockets.http11 import Request, Response


class FakeCluster:
    def __init__(self, target_port: int, namespace: str = "kube-system") -> None:
        self.target_port = target_port
        self.namespace = namespace
        self.pods: list[dict[str, Any]] = [
            {
                "metadata": {
                    "name": "hubble-relay-7d9f",
                    "namespace": namespace,
                    "labels": {"k8s-app": "hubble-relay"},
                },
                "status": {"phase": "Running"},
            }
        ]
        self.forwards: list[str] = []
        self.forbid_portforward = False

    def process_request(self, connection: ServerConnection, request: Request) -> Response | None:
        path = request.path.split("?", 1)[0]
        if path.endswith("/portforward"):
            if self.forbid_portforward:
                return self._json(403, {"kind": "Status", "code": 403, "reason": "Forbidden"})
            return None  # go on with the websocket handshake
        if path == f"/api/v1/namespaces/{self.namespace}/pods":
            query = parse_qs(urlsplit(request.path).query)
            wanted = dict(
                term.split("=", 1)
                for term in query.get("labelSelector", [""])[0].split(",")
                if term
            )
            items = [
                pod
                for pod in self.pods
                if all((pod["metadata"].get("labels") or {}).get(k) == v for k, v in wanted.items())
            ]
            return self._json(200, {"kind": "PodList", "apiVersion": "v1", "items": items})
        return self._json(404, {"kind": "Status", "code": 404})

    @staticmethod
    def _json(status: int, body: dict[str, Any]) -> Response:
        data = json.dumps(body).encode()
        headers = Headers(
            [("Content-Type", "application/json"), ("Content-Length", str(len(data)))]
        )
        return Response(status, "OK" if status == 200 else "Error", headers, data)

    async def portforward(self, ws: ServerConnection) -> None:
        assert ws.request is not None
        self.forwards.append(ws.request.path)
        reader, writer = await asyncio.open_connection("127.0.0.1", self.target_port)
        port = (4245).to_bytes(2, "little")
        await ws.send(b"\x00" + port)
        await ws.send(b"\x01" + port)

        async def up() -> None:
            async for message in ws:
                if isinstance(message, bytes) and message[:1] == b"\x00":
                    writer.write(message[1:])
                    await writer.drain()
            writer.close()

        async def down() -> None:
            while data := await reader.read(65536):
                await ws.send(b"\x00" + data)
            await ws.close()

        await asyncio.gather(up(), down(), return_exceptions=True)


@contextmanager
def fake_cluster(tmp_path: Path, target_port: int) -> Iterator[tuple[FakeCluster, Path]]:
    cluster = FakeCluster(target_port)
    ready = threading.Event()
    holder: dict[str, Any] = {}

    async def main() -> None:
        async with serve(
            cluster.portforward,
            "127.0.0.1",
            0,
            process_request=cluster.process_request,
            subprotocols=["v4.channel.k8s.io", "channel.k8s.io"],
        ) as server:
            holder["port"] = server.sockets[0].getsockname()[1]
            holder["stop"] = asyncio.get_running_loop().create_future()
            ready.set()
            await holder["stop"]

    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_until_complete, args=(main(),), daemon=True)
    thread.start()
    ready.wait(10)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {"name": "fake", "cluster": {"server": f"http://127.0.0.1:{holder['port']}"}}
                ],
                "users": [{"name": "reader", "user": {"token": "not-a-secret"}}],
                "contexts": [{"name": "fake", "context": {"cluster": "fake", "user": "reader"}}],
                "current-context": "fake",
            }
        )
    )
    try:
        yield cluster, kubeconfig
    finally:
        loop.call_soon_threadsafe(holder["stop"].set_result, None)
        thread.join(5)
