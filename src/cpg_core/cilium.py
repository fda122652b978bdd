"""Facts about Cilium and its policy files that adapters need: reading policy YAML, the labels
cpg marks its policies with, and the agent versions a cluster runs."""

from cpg_core.base import (
    LOCAL_CLUSTER_DEFAULT_SINCE,
    POLICY_NAME_PREFIX,
    Version,
    format_version,
    local_cluster_default,
    minimum_version,
    versions_seen,
)
from cpg_core.policy import (
    DEFAULT_DENY_FIELD,
    SECTIONS,
    JsonInputError,
    PolicySet,
    PolicyShapeProblem,
    YamlInputError,
    below_floor,
    load_all,
    load_json,
    load_one,
    policies_in,
    policy_name,
    specs_police,
)
from cpg_core.review import AlsoSelected, also_selected
from cpg_core.synthesis import (
    MANAGED_BY_LABEL,
    MANAGED_BY_VALUE,
    ForeignPolicy,
    foreign_policy,
    narrow_in_text,
    policy_document,
    written_by_cpg,
)

__all__ = [
    "DEFAULT_DENY_FIELD",
    "LOCAL_CLUSTER_DEFAULT_SINCE",
    "MANAGED_BY_LABEL",
    "MANAGED_BY_VALUE",
    "POLICY_NAME_PREFIX",
    "SECTIONS",
    "AlsoSelected",
    "ForeignPolicy",
    "JsonInputError",
    "PolicySet",
    "PolicyShapeProblem",
    "Version",
    "YamlInputError",
    "also_selected",
    "below_floor",
    "foreign_policy",
    "format_version",
    "load_all",
    "load_json",
    "load_one",
    "local_cluster_default",
    "minimum_version",
    "narrow_in_text",
    "policies_in",
    "policy_document",
    "policy_name",
    "specs_police",
    "versions_seen",
    "written_by_cpg",
]
