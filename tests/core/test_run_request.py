"""RunRequest and CheckRequest: every run option checked once, with the field that is wrong."""

from __future__ import annotations

import pytest

from cpg_core import CheckRequest, RequestError, RunRequest


@pytest.mark.parametrize(
    ("values", "field"),
    [
        ({"exit_code": True}, "exit_code"),
        ({"verify": True, "dry_run": True}, "verify"),
        ({"min_flows": 0}, "min_flows"),
        ({"max_malformed": 101.0}, "max_malformed"),
        ({"evidence_sessions": 0}, "evidence_sessions"),
        ({"engine": "spark"}, "engine"),
        ({"scheduler": "tcp://x:8786"}, "scheduler"),
        ({"part_size": "64MiB"}, "part_size"),
        ({"engine": "dask", "part_size": "12KiB"}, "part_size"),
        ({"engine": "dask", "since": "2h"}, "since"),
        ({"since": "yesterday"}, "since"),
        ({"relay_namespace": "Kube_System"}, "relay_namespace"),
        ({"evidence_interval": "0s"}, "evidence_interval"),
        ({"ignore_protocols": ["tcp", "gre"]}, "ignore_protocol"),
    ],
)
def test_a_bad_value_names_its_field(values: dict[str, object], field: str) -> None:
    with pytest.raises(RequestError) as raised:
        RunRequest.build(**values)  # type: ignore[arg-type]
    assert raised.value.field == field


def test_a_dry_run_records_no_evidence_and_keeps_no_samples() -> None:
    dry = RunRequest.build(dry_run=True, exit_code=True, evidence_samples=7)
    assert not dry.evidence.record and dry.aggregate_options().max_samples == 0
    wet = RunRequest.build(evidence_samples=7)
    assert wet.evidence.record and wet.aggregate_options().max_samples == 7
    assert RunRequest.build(evidence=False).aggregate_options().max_samples == 0


def test_the_dask_engine_takes_a_size_and_a_scheduler() -> None:
    request = RunRequest.build(engine="dask", scheduler="local:3", part_size="1GiB", jobs=2)
    assert request.engine.kind == "dask" and request.engine.scheduler == "local:3"
    assert request.engine.part_bytes == 1 << 30 and request.engine.jobs == 2


def test_a_live_window_counts_back_from_now_and_stops_at_until() -> None:
    now = "2026-12-01T12:00:00.000000Z"
    request = RunRequest.build(since="30m", until="2026-12-01T12:10:00Z", duration="1h")
    since, until, stop_after = request.live_window(now)
    assert since.startswith("2026-12-01T11:30:00") and until.startswith("2026-12-01T12:10:00")
    assert stop_after == pytest.approx(600.0)
    past = RunRequest.build(until="2026-12-01T11:00:00Z")
    with pytest.raises(RequestError, match="not a time in the future") as raised:
        past.live_window(now)
    assert raised.value.field == "until"


def test_a_check_takes_current_or_cluster_and_a_boolean_default() -> None:
    with pytest.raises(RequestError) as both:
        CheckRequest.build(inputs=["x.jsonl"], current="today/", cluster=True)
    assert both.value.field == "current"
    with pytest.raises(RequestError) as bad:
        CheckRequest.build(inputs=["x.jsonl"], default_local_cluster="maybe")
    assert bad.value.field == "policy_default_local_cluster"
    with pytest.raises(RequestError):
        CheckRequest.build(inputs=[])
    check = CheckRequest.build(inputs=["x.jsonl"], default_local_cluster="False")
    assert check.agent.default_local_cluster is False and check.policies == "policies"


# Every option of the table reaches the request it belongs to: a value other than the
# default (with the companions it needs) makes another request. An option added to the
# table but dropped on its way through the builders fails here (a new one without a sample
# fails the first test).

RUN_SAMPLES: dict[str, tuple[object, dict[str, object]]] = {
    "namespace": (["shop"], {}),
    "all_namespaces": (True, {}),
    "exclude_namespace": (["kube-system"], {}),
    "include_audit": (True, {}),
    "ignore_protocols": (["udp"], {}),
    "ignore_drop_reasons": (["POLICY_DENIED"], {}),
    "learn": ("forwarded", {}),
    "learn_allowed": (True, {"learn": "forwarded"}),
    "max_malformed": (10.0, {}),
    "since": ("1h", {}),
    "until": ("2026-12-01T00:00:00Z", {}),
    "identities": (["cluster"], {}),
    "declarations": (["objects.yaml", "cluster"], {}),
    "catalogue": (["none", "mine.yaml"], {}),
    "ready_min_span": ("2h", {}),
    "ready_stable_for": ("0", {}),
    "ready_min_flows": (5, {}),
    "only_ready": (True, {}),
    "l7": (True, {}),
    "l7_collapse_paths": (True, {"l7": True}),
    "policy_default_local_cluster": ("false", {}),
    "allow_localhost": ("policy", {}),
    "dry_run": (True, {}),
    "diff": (False, {}),
    "exit_code": (True, {"dry_run": True}),
    "kustomize": (True, {}),
    "shared": (3, {}),
    "cluster_service_namespaces": (9, {}),
    "exact_peers": (["shop/web"], {}),
    "include_system_namespaces": (True, {}),
    "dns_rule": (False, {}),
    "baseline_format": ("kcnp", {}),
    "min_flows": (2, {}),
    "verify": (True, {}),
    "fail_on_infra_drops": (True, {}),
    "evidence": (False, {}),
    "evidence_samples": (3, {}),
    "evidence_sessions": (4, {}),
    "evidence_redact": (True, {}),
    "evidence_interval": ("5m", {}),
    "engine": ("dask", {}),
    "jobs": (2, {}),
    "scheduler": ("local:2", {"engine": "dask"}),
    "part_size": ("64MiB", {"engine": "dask"}),
    "server": ("127.0.0.1:4245", {}),
    "timeout": ("5s", {}),
    "flush_interval": ("10s", {}),
    "metrics_addr": (":9090", {}),
    "duration": ("1m", {}),
    "stable_for": ("2m", {}),
    "max_policies": (10, {}),
    "max_peers": (10, {}),
    "max_rules": (10, {}),
    "max_kinds": (10, {}),
    "cluster_dedup": (True, {}),
    "relay_namespace": ("cilium", {}),
}
CHECK_SAMPLES: dict[str, tuple[object, dict[str, object]]] = {
    "current": ("applied", {}),
    "cluster": (True, {}),
    "include_audit": (True, {}),
    "default_local_cluster": ("false", {}),
    "allow_localhost": ("policy", {}),
    "host_firewall": ("true", {}),
    "dual_stack": ("true", {}),
    "cilium_version": ("1.19", {}),
    "policy_map_max": (100, {}),
    "learn": ("forwarded", {}),
    "include_system_namespaces": (True, {}),
    "identities": (["cluster"], {}),
    "declarations": (["cluster"], {}),
    "catalogue": (["none"], {}),
    "ready_min_span": ("2h", {}),
    "ready_stable_for": ("1h", {}),
    "ready_min_flows": (5, {}),
    "only": (["shop/cpg-cart,cpg-shared-x"], {}),
}


def test_every_option_of_the_table_has_a_sample() -> None:
    from cpg_core.options import OPTIONS

    assert set(RUN_SAMPLES) == {o.name for o in OPTIONS if "run" in o.requests}
    assert set(CHECK_SAMPLES) == {o.name for o in OPTIONS if "check" in o.requests}


@pytest.mark.parametrize("name", sorted(RUN_SAMPLES))
def test_every_run_option_reaches_the_run_request(name: str) -> None:
    if name == "all_namespaces":  # says what the default means; read to refuse a namespace
        with pytest.raises(RequestError):
            RunRequest.build(all_namespaces=True, namespace=["shop"])
        return
    value, companions = RUN_SAMPLES[name]
    base = RunRequest.build(**companions)  # type: ignore[arg-type]
    assert RunRequest.build(**{**companions, name: value}) != base  # type: ignore[arg-type]


@pytest.mark.parametrize("name", sorted(CHECK_SAMPLES))
def test_every_check_option_reaches_the_check_request(name: str) -> None:
    value, companions = CHECK_SAMPLES[name]
    base = CheckRequest.build(inputs=["c.jsonl"], **companions)  # type: ignore[arg-type]
    changed = CheckRequest.build(inputs=["c.jsonl"], **{**companions, name: value})  # type: ignore[arg-type]
    assert changed != base


def test_only_names_policies_as_the_plan_does() -> None:
    built = CheckRequest.build(inputs=["c.jsonl"], only=["shop/cpg-cart, shop/cpg-web", "x"])
    assert built.only == ("shop/cpg-cart", "shop/cpg-web", "x")
    for bad in ("a/b/c", "/cpg-cart", "shop/"):
        with pytest.raises(RequestError, match="is not NAMESPACE/NAME"):
            CheckRequest.build(inputs=["c.jsonl"], only=[bad])
