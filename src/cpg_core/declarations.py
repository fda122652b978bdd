"""What the cluster declares it depends on (ARCHITECTURE §D58): the dependencies its own
objects name (admission webhooks, aggregated APIs, conversion webhooks, Prometheus scrapes
and discovery, node-local DNS caches), read from Kubernetes objects as plain values."""

from cpg_core._synthesis.aggregate_plans import with_declared_entries
from cpg_core._synthesis.catalogue import (
    BUILTIN,
    Catalogue,
    CatalogueError,
    PlatformWorkload,
    catalogue_from,
)
from cpg_core._synthesis.declarations import (
    KUBE_APISERVER,
    Declarations,
    Dependency,
    DnsCache,
    Pods,
    PodShape,
    declarations,
    declares_anything,
    declaring,
    is_dns_cache,
    joined_declarations,
)

BUILTIN_CATALOGUE = BUILTIN
"""The platform workloads cpg recognises unless told otherwise."""
CLUSTER = "cluster"
"""The source that lists the objects from the cluster instead of reading a file."""
NO_CATALOGUE = "none"
"""The catalogue source that leaves the built-in entries out."""

__all__ = [
    "BUILTIN_CATALOGUE",
    "CLUSTER",
    "KUBE_APISERVER",
    "NO_CATALOGUE",
    "Catalogue",
    "CatalogueError",
    "Declarations",
    "Dependency",
    "DnsCache",
    "PlatformWorkload",
    "PodShape",
    "Pods",
    "catalogue_from",
    "declarations",
    "declares_anything",
    "declaring",
    "is_dns_cache",
    "joined_declarations",
    "with_declared_entries",
]
