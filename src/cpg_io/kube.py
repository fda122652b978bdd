"""Reading from Kubernetes (never writing): the Cilium policies already in a cluster.

The ``kubernetes`` client is imported only when a command needs the cluster, so the other
commands start fast.
"""

from __future__ import annotations

import contextlib
import os
from pathlib import Path
from typing import Any

import attrs

from cpg_core import CpgError, Setting
from cpg_core.cilium import CONFIG_MAP, load_json, policies_in
from cpg_io.errors import KubeError, RelaySetupError

CILIUM_GROUP = "cilium.io"
CILIUM_VERSION = "v2"
NETWORK_POLICY_API = ("policy.networking.k8s.io", "v1alpha2")
"""Where Kubernetes' ClusterNetworkPolicy lives (its group and version)."""


def api_client(
    kubeconfig: Path | None = None,
    context: str | None = None,
    timeout: float | None = None,
    temp_dir: Path | None = None,
) -> Any:
    """An API client from a kubeconfig (``--kubeconfig``, else ``$KUBECONFIG``, else
    ``~/.kube/config``) and context (``--context``, else the current one); in a pod without
    any, from its service account (:func:`in_a_pod`). With ``timeout``,
    an auth plugin that does not answer in time is an error, not a hang. Certificates and keys
    given inline (``client-key-data``…) are written by the client to files: into ``temp_dir``
    when given (a private folder the caller removes with :func:`forget_temp_dir`), never
    left in the shared temp folder for an exit handler that may not run."""
    if timeout is not None:
        return _bounded(
            lambda: api_client(kubeconfig, context, temp_dir=temp_dir),
            timeout,
            "the kubeconfig's auth",
        )
    from kubernetes import client, config
    from kubernetes.config.config_exception import ConfigException

    if temp_dir is not None:
        temp_dir.mkdir(mode=0o700, parents=True, exist_ok=True)
    # The client reads $KUBECONFIG once, at import; read it at each call instead.
    default = os.path.expanduser(os.environ.get("KUBECONFIG") or "~/.kube/config")
    configuration = client.Configuration()
    configuration.retries = _retries()
    if kubeconfig is None and in_a_pod(default):
        return client.ApiClient(_service_account(configuration))
    try:
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(kubeconfig) if kubeconfig else default,
            context=context,
            client_configuration=configuration,
            persist_config=False,
            temp_file_path=str(temp_dir) if temp_dir is not None else None,
        )
    except ConfigException as exc:
        where = str(kubeconfig) if kubeconfig else "$KUBECONFIG or ~/.kube/config"
        raise KubeError(
            f"cannot load a kubeconfig from {where} ({exc}); give ",
            Setting("kubeconfig"),
            " and ",
            Setting("context"),
        ) from None
    except FileNotFoundError:
        raise KubeError(
            f"kubeconfig {kubeconfig or default} does not exist; give ", Setting("kubeconfig")
        ) from None
    except Exception as exc:  # auth plugins fail in many ways
        raise KubeError(f"cannot use the kubeconfig's credentials ({exc})") from None
    return client.ApiClient(configuration)


def _retries() -> Any:
    """Retries that stay inside the stated deadline: a refused or reset connection is tried
    again at once (a few times), a request the server never answers is not (urllib3's
    default tried it three more times: a silent API server held a 30 s read for 122 s)."""
    from urllib3.util.retry import Retry

    return Retry(total=3, connect=3, read=0, status=0, other=0, backoff_factor=0.1)


SERVICE_ACCOUNT = Path("/var/run/secrets/kubernetes.io/serviceaccount")
"""Where Kubernetes mounts a pod's service-account token and the cluster's CA."""


def in_a_pod(default_kubeconfig: str) -> bool:
    """Whether cpg runs in a pod with nothing else to go by: the API server's address in the
    environment, a service-account token mounted, and no kubeconfig ($KUBECONFIG or
    ~/.kube/config) to take instead."""
    return (
        bool(os.environ.get("KUBERNETES_SERVICE_HOST"))
        and not os.path.exists(default_kubeconfig)
        and (SERVICE_ACCOUNT / "token").is_file()
    )


def _service_account(configuration: Any) -> Any:
    """The configuration of the pod's own service account (its token, re-read as it
    rotates, and the cluster's CA)."""
    from kubernetes.config.config_exception import ConfigException
    from kubernetes.config.incluster_config import InClusterConfigLoader

    loader = InClusterConfigLoader(  # type: ignore[no-untyped-call]
        token_filename=str(SERVICE_ACCOUNT / "token"),
        cert_filename=str(SERVICE_ACCOUNT / "ca.crt"),
        environ=os.environ,
    )
    try:
        loader.load_and_set(configuration)  # type: ignore[no-untyped-call]
    except ConfigException as exc:
        raise KubeError(
            f"cannot use the pod's service account in {SERVICE_ACCOUNT} ({exc}); give ",
            Setting("kubeconfig"),
        ) from None
    return configuration


def forget_temp_dir(temp_dir: Path) -> None:
    """Remove a client's private credential folder, and the client library's memory of the
    files in it (it would hand out their paths again)."""
    import shutil

    if temp_dir.exists():
        shutil.rmtree(temp_dir, ignore_errors=True)
    try:
        from kubernetes.config import kube_config
    except ImportError:  # pragma: no cover - the dependency is always installed
        return
    prefix = str(temp_dir) + os.sep
    for key, name in list(kube_config._temp_files.items()):
        if str(name).startswith(prefix):
            del kube_config._temp_files[key]


def _list(
    api: Any,
    plural: str,
    namespace: str | None,
    label_selector: str | None,
    group: str = CILIUM_GROUP,
    version: str = CILIUM_VERSION,
    timeout: float | None = None,
) -> list[dict[str, Any]]:
    timeout = REQUEST_TIMEOUT if timeout is None else timeout
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    custom = client.CustomObjectsApi(api)
    kwargs: dict[str, Any] = {"label_selector": label_selector} if label_selector else {}
    kwargs.update(_preload_content=False, _request_timeout=timeout)
    result: Any
    try:
        if namespace is None:
            result = custom.list_cluster_custom_object(group, version, plural, **kwargs)
        else:
            result = custom.list_namespaced_custom_object(
                group, version, namespace, plural, **kwargs
            )
        items = list_items(result.data, f"{plural}.{group}")
    except ApiException as exc:
        if exc.status == 403:
            raise KubeError(
                f"RBAC denied listing {plural}.{group}; cpg needs 'list' on it "
                f"({'all namespaces' if namespace is None else namespace})"
            ) from None
        if exc.status == 404:
            return []  # the CRD is not installed: no such policies
        raise KubeError(
            f"listing {plural}.{group} failed: HTTP {exc.status} {exc.reason}"
        ) from None
    except (HTTPError, OSError) as exc:
        host = getattr(api.configuration, "host", "the API server")
        raise KubeError(
            f"cannot reach {host} or no answer within {timeout:g} s while listing {plural} "
            f"({exc}); check ",
            Setting("kubeconfig"),
            " and ",
            Setting("context"),
        ) from None
    kind = _KINDS[plural]
    for item in items:
        item.setdefault("kind", kind)
    return items


REQUEST_TIMEOUT = 30.0
"""Seconds a Kubernetes API call may take (connect and each read): a server that accepts
and never answers is an error, not a wait forever."""


def list_items(data: bytes, what: str) -> list[dict[str, Any]]:
    """The objects of a Kubernetes list answer, checked before use: KubeError naming the
    list when the answer is no list of objects (an item that is no object is left out)."""
    try:
        body = load_json(data, f"the answer to listing {what}")
    except CpgError as exc:
        raise KubeError(f"{exc}") from None
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(body, dict) or not isinstance(items, list | type(None)):
        raise KubeError(
            f"the answer to listing {what} is not a Kubernetes list (an object with items); "
            "is this a Kubernetes API server?"
        )
    return [item for item in items or [] if isinstance(item, dict)]


_KINDS = {
    "ciliumnetworkpolicies": "CiliumNetworkPolicy",
    "ciliumclusterwidenetworkpolicies": "CiliumClusterwideNetworkPolicy",
    "ciliumendpoints": "CiliumEndpoint",
    "ciliumidentities": "CiliumIdentity",
    "clusternetworkpolicies": "ClusterNetworkPolicy",
    "networkpolicies": "NetworkPolicy",
}
"""The kind of each item of a list (the API leaves it out of list items)."""


def cluster_identities(
    kubeconfig: Path | None, context: str | None, temp_dir: Path | None = None
) -> list[dict[str, Any]]:
    """Every CiliumEndpoint, CiliumIdentity and pod in the cluster (read-only: 'list' on
    each), as ``kubectl get ciliumendpoints,ciliumidentities,pods -A -o json`` gives them."""
    import tempfile

    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    own = temp_dir is None
    folder = Path(tempfile.mkdtemp(prefix="cpg-kube-")) if temp_dir is None else temp_dir
    try:
        api = api_client(kubeconfig, context, temp_dir=folder)
        found = _list(api, "ciliumendpoints", None, None)
        found += _list(api, "ciliumidentities", None, None)
        try:
            core: Any = client.CoreV1Api(api)  # raw JSON: the objects as kubectl prints them
            raw = core.list_pod_for_all_namespaces(
                _preload_content=False, _request_timeout=REQUEST_TIMEOUT
            )
            pods = list_items(raw.data, "pods")
        except ApiException as exc:
            if exc.status == 403:
                raise KubeError("RBAC denied listing pods; cpg needs 'list' on pods") from None
            raise KubeError(f"listing pods failed: HTTP {exc.status} {exc.reason}") from None
        except (HTTPError, OSError, ValueError) as exc:
            raise KubeError(
                f"listing pods failed or got no answer within {REQUEST_TIMEOUT:g} s ({exc})"
            ) from None
        found += [{**pod, "kind": "Pod"} for pod in pods]
        return found
    finally:
        if own:
            forget_temp_dir(folder)


DECLARATION_LISTS = (
    (
        "admissionregistration.k8s.io",
        "v1",
        "validatingwebhookconfigurations",
        "ValidatingWebhookConfiguration",
        False,
    ),
    (
        "admissionregistration.k8s.io",
        "v1",
        "mutatingwebhookconfigurations",
        "MutatingWebhookConfiguration",
        False,
    ),
    ("apiregistration.k8s.io", "v1", "apiservices", "APIService", False),
    ("apiextensions.k8s.io", "v1", "customresourcedefinitions", "CustomResourceDefinition", False),
    ("", "v1", "namespaces", "Namespace", False),
    ("", "v1", "services", "Service", True),
    ("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice", True),
    ("", "v1", "pods", "Pod", True),
    ("monitoring.coreos.com", "v1", "servicemonitors", "ServiceMonitor", True),
    ("monitoring.coreos.com", "v1", "podmonitors", "PodMonitor", True),
    ("monitoring.coreos.com", "v1", "prometheuses", "Prometheus", True),
)
"""(group, version, plural, kind, namespaced) of each list ``--declarations cluster`` reads
(verb ``list`` only; the manifests' ClusterRole grants exactly these)."""
MAX_LIST_BYTES = 512 << 20
"""The largest list answer read (a big cluster's pods or CRDs with their schemas)."""


def cluster_declarations(
    kubeconfig: Path | None, context: str | None, temp_dir: Path | None = None
) -> tuple[list[dict[str, Any]], list[str]]:
    """The objects that declare what the cluster depends on (read-only: ``list`` on each
    of :data:`DECLARATION_LISTS`), and one line for each list that could not be read (no
    right to list it, or an error): the others are still used. A server that does not
    answer within the timeout stops the reading (KubeError): one wait, not one per list."""
    import tempfile

    own = temp_dir is None
    folder = Path(tempfile.mkdtemp(prefix="cpg-kube-")) if temp_dir is None else temp_dir
    found: list[dict[str, Any]] = []
    notes: list[str] = []
    try:
        api = api_client(kubeconfig, context, temp_dir=folder)
        for group, version, plural, kind, _namespaced in DECLARATION_LISTS:
            items, problem = _list_raw(api, group, version, plural)
            if problem:
                notes.append(problem)
            found += [{**item, "kind": kind} for item in items]
        return found, notes
    finally:
        if own:
            forget_temp_dir(folder)


def _list_raw(api: Any, group: str, version: str, plural: str) -> tuple[list[dict[str, Any]], str]:
    """The items of one cluster-wide list, or why not (a 404 is a kind the cluster does not
    have: no items, no note). KubeError when the server cannot be reached or stays silent."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    what = f"{plural}.{group}" if group else plural
    options: dict[str, Any] = {"_preload_content": False, "_request_timeout": REQUEST_TIMEOUT}
    try:
        if group:  # any group's list is GET /apis/GROUP/VERSION/PLURAL
            custom: Any = client.CustomObjectsApi(api)
            raw = custom.list_cluster_custom_object(group, version, plural, **options)
        else:
            core: Any = client.CoreV1Api(api)
            raw = getattr(core, _CORE_LISTS[plural])(**options)
        data = _read_capped(raw, MAX_LIST_BYTES, what)
    except ApiException as exc:
        if exc.status == 404:
            return [], ""
        if exc.status == 403:
            return [], (
                f"not allowed to list {what} (the ClusterRole needs 'list' on it); what it "
                "declares is left out"
            )
        return [], f"listing {what} failed: HTTP {exc.status} {exc.reason}; left out"
    except _TooLarge as exc:
        return [], f"{exc}; left out"
    except (HTTPError, OSError) as exc:
        host = getattr(api.configuration, "host", "the API server")
        raise KubeError(
            f"cannot reach {host} or no answer within {REQUEST_TIMEOUT:g} s while listing "
            f"{what} ({exc}); check ",
            Setting("kubeconfig"),
            " and ",
            Setting("context"),
        ) from None
    try:
        return list_items(data, what), ""
    except KubeError as exc:
        return [], f"{exc}; left out"


_CORE_LISTS = {
    "namespaces": "list_namespace",
    "services": "list_service_for_all_namespaces",
    "pods": "list_pod_for_all_namespaces",
}


class _TooLarge(ValueError):
    pass


def _read_capped(response: Any, limit: int, what: str) -> bytes:
    """The body of a raw answer, refused past ``limit`` bytes."""
    chunks: list[bytes] = []
    size = 0
    while True:
        chunk = response.read(1 << 20)
        if not chunk:
            break
        size += len(chunk)
        if size > limit:
            response.close()
            raise _TooLarge(f"the answer to listing {what} is larger than {limit >> 20} MiB")
        chunks.append(chunk)
    return b"".join(chunks)


def list_cilium_policies(
    api: Any, namespaces: list[str] | None = None, label_selector: str | None = None
) -> list[dict[str, Any]]:
    """CiliumNetworkPolicies (in ``namespaces``, or all) and CiliumClusterwideNetworkPolicies."""
    policies: list[dict[str, Any]] = []
    for namespace in namespaces or [None]:  # type: ignore[list-item]
        policies += _list(api, "ciliumnetworkpolicies", namespace, label_selector)
    policies += _list(api, "ciliumclusterwidenetworkpolicies", None, label_selector)
    return policies


def cluster_policies(kubeconfig: Path | None, context: str | None) -> list[dict[str, Any]]:
    """Every Cilium policy in the cluster (read-only), with inline kubeconfig credentials kept
    in a private folder that is gone when this returns."""
    import tempfile

    temp_dir = Path(tempfile.mkdtemp(prefix="cpg-kube-"))
    try:
        return list_cilium_policies(api_client(kubeconfig, context, temp_dir=temp_dir))
    finally:
        forget_temp_dir(temp_dir)


@attrs.frozen
class ClusterState:
    """What the review commands read of a cluster: its policies, its agents' images (their
    versions) and their settings (``cilium-config``; None when it could not be read)."""

    policies: list[dict[str, Any]]
    images: list[str]
    config: dict[str, str] | None


def cluster_state(
    kubeconfig: Path | None, context: str | None, temp_dir: Path | None = None
) -> ClusterState:
    """Every Cilium policy, Kubernetes ClusterNetworkPolicy and NetworkPolicy in the cluster,
    its agents' images and settings (all read-only), with inline
    kubeconfig credentials in ``temp_dir`` when given, else a private folder removed here."""
    import tempfile

    own = temp_dir is None
    folder = Path(tempfile.mkdtemp(prefix="cpg-kube-")) if temp_dir is None else temp_dir
    try:
        api = api_client(kubeconfig, context, temp_dir=folder)
        policies = list_cilium_policies(api)
        # Kubernetes' ClusterNetworkPolicies judge traffic around Cilium's (none when their
        # CRD is not installed).
        for item in _list(api, "clusternetworkpolicies", None, None, *NETWORK_POLICY_API):
            item.setdefault("apiVersion", "/".join(NETWORK_POLICY_API))
            policies.append(item)
        policies += network_policies(api)
        try:
            images = cilium_agent_images(api, AGENT_TIMEOUT)
        except (KubeError, OSError, _api_error()):  # e.g. no right to list kube-system pods
            images = []
        return ClusterState(policies, images, cilium_config(api, AGENT_TIMEOUT))
    finally:
        if own:
            forget_temp_dir(folder)


NETWORKING_API = ("networking.k8s.io", "v1")


def network_policies(api: Any) -> list[dict[str, Any]]:
    """Kubernetes NetworkPolicies, which Cilium enforces beside its own (§D48). Without the
    right to list them the answer would be judged without them: refused with the RBAC to add
    (a judgment that leaves out policies the cluster enforces could say traffic passes that
    does not)."""
    found = []
    for item in _list(api, "networkpolicies", None, None, *NETWORKING_API):
        item.setdefault("apiVersion", "/".join(NETWORKING_API))
        meta = item.get("metadata") or {}
        where = f"the cluster's NetworkPolicy {meta.get('namespace')}/{meta.get('name')}: "
        found += policies_in(item, where)  # read as the Cilium policy Cilium makes of it
    return found


def _api_error() -> type[Exception]:
    from kubernetes.client.exceptions import ApiException

    return ApiException


AGENT_TIMEOUT = 10.0
"""Seconds to wait for the list of Cilium agents."""


RELAY_SELECTOR = "k8s-app=hubble-relay"
RELAY_PORT = 4245


def _bounded(call: Any, timeout: float, what: str) -> Any:
    """Run a Kubernetes call with a deadline: an auth exec plugin that waits for a terminal
    must not hang cpg (the call runs in a daemon thread, which cannot hold up the exit)."""
    import threading

    outcome: dict[str, Any] = {}

    def run() -> None:
        try:
            outcome["value"] = call()
        except BaseException as exc:
            outcome["error"] = exc

    worker = threading.Thread(target=run, name="cpg kubernetes call", daemon=True)
    worker.start()
    worker.join(timeout)
    if worker.is_alive():
        raise KubeError(
            f"{what} did not answer within {timeout:g}s; if your kubeconfig uses an auth plugin "
            "that needs a terminal (a login prompt), log in first, or give ",
            Setting("server"),
        )
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def find_relay_pod(api: Any, namespace: str, timeout: float) -> str:
    """The name of a running hubble-relay pod in ``namespace``."""
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException
    from urllib3.exceptions import HTTPError

    def call() -> Any:
        return client.CoreV1Api(api).list_namespaced_pod(namespace, label_selector=RELAY_SELECTOR)

    try:
        pods = _bounded(call, timeout, "the Kubernetes API")
    except ApiException as exc:
        if exc.status == 403:
            raise KubeError(
                f"RBAC denied listing pods in {namespace}; cpg needs 'list' on pods there to find "
                "hubble-relay (or give ",
                Setting("server"),
                ")",
            ) from None
        raise KubeError(
            f"listing pods in {namespace} failed: HTTP {exc.status} {exc.reason}"
        ) from None
    except (HTTPError, OSError) as exc:
        host = getattr(api.configuration, "host", "the API server")
        raise KubeError(
            f"cannot reach {host} ({exc}); check ",
            Setting("kubeconfig"),
            " and ",
            Setting("context"),
        ) from None
    items = list(pods.items or [])
    if not items:
        raise KubeError(
            f"no hubble-relay pod in {namespace} (selector {RELAY_SELECTOR}); is Hubble Relay "
            "enabled? Give ",
            Setting("relay_namespace"),
            " if it runs elsewhere, or ",
            Setting("server"),
        )
    running: list[str] = sorted(
        str(p.metadata.name) for p in items if p.status and p.status.phase == "Running"
    )
    if not running:
        raise KubeError(
            f"no running hubble-relay pod in {namespace} ({len(items)} found, none running)"
        )
    return running[0]


def _quiet_proxy_resets() -> None:
    """The Kubernetes client's proxy thread raises when a forwarded connection is reset at
    close, which is how connections end here; keep that out of the user's stderr."""
    import threading

    previous = threading.excepthook
    if getattr(previous, "cpg_quiet", False):
        return

    def hook(args: threading.ExceptHookArgs) -> None:
        name = args.thread.name if args.thread is not None else ""
        if name.startswith("Kubernetes port forward proxy") and issubclass(
            args.exc_type, ConnectionResetError | BrokenPipeError
        ):
            return
        previous(args)

    hook.cpg_quiet = True  # type: ignore[attr-defined]
    threading.excepthook = hook


class PortForwarder:
    """A local TCP port forwarded to a pod port through the Kubernetes API (one websocket
    stream per connection), like ``kubectl port-forward``. Read-only towards the cluster."""

    def __init__(self, api: Any, namespace: str, pod: str, port: int = RELAY_PORT) -> None:
        import socket
        import threading

        self.api = api
        self.namespace = namespace
        self.pod = pod
        self.port = port
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.address = f"127.0.0.1:{self._listener.getsockname()[1]}"
        self._closed = threading.Event()
        _quiet_proxy_resets()
        threading.Thread(target=self._accept, name="cpg port-forward", daemon=True).start()

    def _open(self) -> Any:
        from kubernetes import client
        from kubernetes.stream import portforward

        core = client.CoreV1Api(self.api)
        return portforward(
            core.connect_get_namespaced_pod_portforward,
            self.pod,
            self.namespace,
            ports=str(self.port),
        )

    def check(self, timeout: float) -> None:
        """Open (and close) one forward, so that RBAC or API errors show up front."""
        from kubernetes.client.exceptions import ApiException

        try:
            forward = _bounded(self._open, timeout, "the Kubernetes API")
        except ApiException as exc:
            if exc.status == 403:
                raise KubeError(
                    f"RBAC denied port-forwarding to {self.namespace}/{self.pod}; cpg needs "
                    "'create' on pods/portforward there (or give ",
                    Setting("server"),
                    ")",
                ) from None
            raise KubeError(
                f"port-forward to {self.namespace}/{self.pod} failed: {exc.reason}"
            ) from None
        except Exception as exc:  # the websocket client raises several kinds
            if isinstance(exc, KubeError):
                raise
            raise KubeError(f"port-forward to {self.namespace}/{self.pod} failed: {exc}") from None
        forward.close()

    def _accept(self) -> None:
        import threading

        while not self._closed.is_set():
            try:
                local, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._bridge, args=(local,), daemon=True).start()

    def _bridge(self, local: Any) -> None:
        import threading

        try:
            forward = self._open()
        except Exception:
            local.close()
            return
        remote = forward.socket(self.port)
        remote.setblocking(True)

        def pump(source: Any, sink: Any) -> None:
            try:
                while data := source.recv(65536):
                    sink.sendall(data)
            except OSError:
                pass
            finally:
                for side in (source, sink):
                    with contextlib.suppress(OSError):
                        side.close()

        threading.Thread(target=pump, args=(remote, local), daemon=True).start()
        pump(local, remote)
        forward.close()

    def close(self) -> None:
        self._closed.set()
        self._listener.close()


def cpg_managed_policies(
    api: Any, namespaces: list[str] | None
) -> dict[tuple[str, str], dict[str, Any]]:
    """The cpg-managed CiliumNetworkPolicies already applied, by (namespace, name)."""
    live = list_cilium_policies(api, namespaces, label_selector="app.kubernetes.io/managed-by=cpg")
    return {
        (p["metadata"].get("namespace", ""), p["metadata"].get("name", "")): p
        for p in live
        if p.get("kind") == "CiliumNetworkPolicy" and isinstance(p.get("metadata"), dict)
    }


def forward_to_relay(api: Any, namespace: str, timeout: float) -> PortForwarder:
    """A checked local port-forward to the hubble-relay pod in ``namespace``."""
    pod = find_relay_pod(api, namespace, timeout)
    forwarder = PortForwarder(api, namespace, pod)
    try:
        forwarder.check(timeout)
    except BaseException:
        forwarder.close()
        raise
    return forwarder


CILIUM_AGENT_SELECTOR = "k8s-app=cilium"


def cilium_agent_images(api: Any, timeout: float, namespace: str = "kube-system") -> list[str]:
    """The agent image of every running Cilium pod (one per node), for version detection."""
    from kubernetes import client

    def call() -> Any:
        return client.CoreV1Api(api).list_namespaced_pod(
            namespace, label_selector=CILIUM_AGENT_SELECTOR
        )

    images = []
    for pod in _bounded(call, timeout, "the Kubernetes API").items or []:
        if not pod.status or pod.status.phase != "Running" or not pod.spec:
            continue
        containers = list(pod.spec.containers or [])
        agent = next((c for c in containers if c.name == "cilium-agent"), None)
        chosen = agent or (containers[0] if containers else None)
        if chosen is not None and chosen.image:
            images.append(str(chosen.image))
    return images


def cilium_config(api: Any, timeout: float) -> dict[str, str] | None:
    """The agents' settings (the data of ``kube-system/cilium-config``, read with a ``get``),
    or None when it cannot be read (no right to, not there, no answer): the settings are
    then the ones given, else Cilium's defaults, and the run says so."""
    from kubernetes import client

    namespace, name = CONFIG_MAP

    def call() -> Any:
        return client.CoreV1Api(api).read_namespaced_config_map(name, namespace)

    try:
        found = _bounded(call, timeout, "the Kubernetes API")
    except (KubeError, OSError, _api_error()):
        return None
    data = getattr(found, "data", None) or {}
    return {str(k): str(v) for k, v in data.items() if len(str(v)) <= 4096}


def _labels_of(pod: dict[str, Any]) -> dict[str, str]:
    metadata = pod.get("metadata")
    labels = metadata.get("labels") if isinstance(metadata, dict) else None
    return {str(k): str(v) for k, v in labels.items()} if isinstance(labels, dict) else {}


def namespace_pod_labels(
    namespaces: list[str],
    kubeconfig: Path | None,
    context: str | None,
    temp_dir: Path | None = None,
    timeout: float = AGENT_TIMEOUT,
) -> dict[str, list[dict[str, str]]]:
    """The labels of every pod in each namespace (read-only: 'list' on pods), for ``cpg
    lint --cluster``. A namespace cpg may not read is a KubeError naming it."""
    import tempfile

    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    own = temp_dir is None
    folder = Path(tempfile.mkdtemp(prefix="cpg-kube-")) if temp_dir is None else temp_dir
    try:
        api = api_client(kubeconfig, context, temp_dir=folder)
        found: dict[str, list[dict[str, str]]] = {}
        for namespace in namespaces:

            def call(namespace: str = namespace) -> Any:
                return client.CoreV1Api(api).list_namespaced_pod(
                    namespace, _preload_content=False, _request_timeout=timeout
                )

            try:
                pods = list_items(
                    _bounded(call, timeout, "the Kubernetes API").data, f"the pods of {namespace}"
                )
            except ApiException as exc:
                raise KubeError(
                    f"listing the pods of {namespace} failed ({exc.status} {exc.reason}); ",
                    Setting("cluster"),
                    " needs 'list' on pods there",
                ) from None
            found[namespace] = [_labels_of(pod) for pod in pods]
        return found
    finally:
        if own:
            forget_temp_dir(folder)


@attrs.define
class RelayConnection:
    """Where a live capture connects, and what it set up to get there."""

    server: str
    description: str
    forwarder: PortForwarder | None = None
    in_cluster: dict[tuple[str, str], dict[str, Any]] | None = None
    temp_dir: Path | None = None
    """The client's private credential folder, removed on close."""

    def close(self) -> None:
        forwarder, self.forwarder = self.forwarder, None
        if forwarder is not None:
            forwarder.close()
        if self.temp_dir is not None:
            forget_temp_dir(self.temp_dir)


def prepare_relay(
    server: str | None,
    *,
    timeout: float,
    namespaces: list[str] | None = None,
    cluster_dedup: bool = False,
    relay_namespace: str = "kube-system",
    kubeconfig: Path | None = None,
    context: str | None = None,
    temp_dir: Path | None = None,
) -> RelayConnection:
    """The cluster work before a live capture, shared by ``cpg generate`` and cpg-mcp: the
    applied cpg policies for ``cluster_dedup``, and a port-forward to the hubble-relay pod when
    no ``server`` was given. Bounded by ``timeout``; RelaySetupError names the failed step."""
    connection = RelayConnection(server=server or "", description=server or "", temp_dir=temp_dir)
    if server and not cluster_dedup:
        return connection
    try:
        return _connect(
            connection,
            server,
            timeout,
            namespaces,
            cluster_dedup,
            relay_namespace,
            kubeconfig,
            context,
        )
    except BaseException:
        connection.close()
        raise


def _connect(
    connection: RelayConnection,
    server: str | None,
    timeout: float,
    namespaces: list[str] | None,
    cluster_dedup: bool,
    relay_namespace: str,
    kubeconfig: Path | None,
    context: str | None,
) -> RelayConnection:
    temp_dir = connection.temp_dir
    try:
        api = api_client(kubeconfig, context, timeout=timeout, temp_dir=temp_dir)
    except KubeError as exc:
        step = "cluster_dedup" if cluster_dedup else "server"
        raise RelaySetupError(*exc.parts, field=step) from None
    if cluster_dedup:
        try:
            connection.in_cluster = cpg_managed_policies(api, namespaces or None)
        except KubeError as exc:
            raise RelaySetupError(*exc.parts, field="cluster_dedup") from None
    if not server:
        try:
            forwarder = forward_to_relay(api, relay_namespace, timeout)
        except KubeError as exc:
            raise RelaySetupError(*exc.parts, field="server") from None
        connection.forwarder = forwarder
        connection.server = forwarder.address
        connection.description = (
            f"{forwarder.address} (port-forward to {relay_namespace}/{forwarder.pod})"
        )
    return connection
