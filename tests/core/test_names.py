from __future__ import annotations

import pytest

from cpg_core._base.names import is_dns1123_label, path_component_problem, policy_name


@pytest.mark.parametrize("workload", ["web", "payments-api", "a.b", "x" * 59])
def test_valid_workloads_keep_their_plain_name(workload: str) -> None:
    assert policy_name(workload) == "cpg-" + workload


@pytest.mark.parametrize("workload", ["MyApp", "my_app", "x" * 80, "ünï", "a..b", "___"])
def test_other_workloads_become_valid_distinct_names(workload: str) -> None:
    name = policy_name(workload)
    assert name.startswith("cpg-")
    assert len(name) <= 63
    assert is_dns1123_label(name.replace(".", "-"))
    assert name != "cpg-" + workload


def test_names_that_would_collide_stay_distinct() -> None:
    names = {policy_name(w) for w in ("myapp", "MyApp", "MYAPP", "my_app", "my-app")}
    assert len(names) == 5


def test_path_components() -> None:
    assert path_component_problem("web") is None
    assert path_component_problem("..") == "is a directory-traversal segment"
    assert path_component_problem("a/b") == "contains a path separator"
    assert path_component_problem("") == "is empty"
