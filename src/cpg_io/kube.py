"""Reading from Kubernetes (never writing): the Cilium policies already in a cluster.

The ``kubernetes`` client is imported only when a command needs the cluster, so the other
commands start fast.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

CILIUM_GROUP = "cilium.io"
CILIUM_VERSION = "v2"


class KubeError(Exception):
    """The cluster could not be read; the message says why and what to check."""


def api_client(kubeconfig: Path | None = None, context: str | None = None) -> Any:
    """An API client from a kubeconfig (``--kubeconfig``, else ``$KUBECONFIG``, else
    ``~/.kube/config``) and context (``--context``, else the current one)."""
    from kubernetes import config
    from kubernetes.config.config_exception import ConfigException

    try:
        return config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig) if kubeconfig else None,
            context=context,
            persist_config=False,
        )
    except ConfigException as exc:
        where = str(kubeconfig) if kubeconfig else "$KUBECONFIG or ~/.kube/config"
        raise KubeError(
            f"cannot load a kubeconfig from {where} ({exc}); pass --kubeconfig FILE and --context NAME"
        ) from None
    except FileNotFoundError:
        raise KubeError(f"kubeconfig {kubeconfig} does not exist; pass --kubeconfig FILE") from None


def _list(
    api: Any, plural: str, namespace: str | None, label_selector: str | None
) -> list[dict[str, Any]]:
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    custom = client.CustomObjectsApi(api)
    kwargs: dict[str, Any] = {"label_selector": label_selector} if label_selector else {}
    result: Any
    try:
        if namespace is None:
            result = custom.list_cluster_custom_object(
                CILIUM_GROUP, CILIUM_VERSION, plural, **kwargs
            )
        else:
            result = custom.list_namespaced_custom_object(
                CILIUM_GROUP, CILIUM_VERSION, namespace, plural, **kwargs
            )
    except ApiException as exc:
        if exc.status == 403:
            raise KubeError(
                f"RBAC denied listing {plural}.{CILIUM_GROUP}; cpg needs 'list' on it "
                f"({'all namespaces' if namespace is None else namespace})"
            ) from None
        if exc.status == 404:
            return []  # the CRD is not installed: no such policies
        raise KubeError(
            f"listing {plural}.{CILIUM_GROUP} failed: HTTP {exc.status} {exc.reason}"
        ) from None
    except (HTTPError, OSError) as exc:
        host = getattr(api.configuration, "host", "the API server")
        raise KubeError(f"cannot reach {host} ({exc}); check --kubeconfig and --context") from None
    items = result.get("items") or []
    kind = (
        "CiliumNetworkPolicy"
        if plural == "ciliumnetworkpolicies"
        else "CiliumClusterwideNetworkPolicy"
    )
    for item in items:
        item.setdefault("kind", kind)
    return [item for item in items if isinstance(item, dict)]


def list_cilium_policies(
    api: Any, namespaces: list[str] | None = None, label_selector: str | None = None
) -> list[dict[str, Any]]:
    """CiliumNetworkPolicies (in ``namespaces``, or all) and CiliumClusterwideNetworkPolicies."""
    policies: list[dict[str, Any]] = []
    for namespace in namespaces or [None]:  # type: ignore[list-item]
        policies += _list(api, "ciliumnetworkpolicies", namespace, label_selector)
    policies += _list(api, "ciliumclusterwidenetworkpolicies", None, label_selector)
    return policies
