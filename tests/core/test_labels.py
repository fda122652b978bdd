from __future__ import annotations

from cpg_core._base.labels import (
    Label,
    parse_label,
    reserved_names,
    select_labels,
    stable_labels,
    workload_name,
)


def test_parse_label_like_cilium() -> None:
    assert parse_label("k8s:app=web") == Label("k8s", "app", "web")
    assert parse_label("reserved:world") == Label("reserved", "world", "")
    assert parse_label("$host") == Label("reserved", "host", "")
    assert parse_label("app=web") == Label("unspec", "app", "web")
    assert parse_label("k8s:a=b=c") == Label("k8s", "a", "b=c")
    assert parse_label("cidr:10.0.0.0/8") == Label("cidr", "10.0.0.0/8", "")


def test_unstable_labels_are_never_selected() -> None:
    labels = [
        "k8s:tier=web",
        "k8s:pod-template-hash=abc",
        "k8s:controller-revision-hash=1",
        "k8s:statefulset.kubernetes.io/pod-name=db-0",
        "k8s:apps.kubernetes.io/pod-index=0",
        "k8s:job-name=j",
        "k8s:controller-uid=u",
        "k8s:batch.kubernetes.io/job-name=j",
        "k8s:batch.kubernetes.io/controller-uid=u",
        "k8s:io.cilium.k8s.policy.serviceaccount=sa",
        "k8s:io.cilium.k8s.namespace.labels.team=a",
        "k8s:io.kubernetes.pod.namespace=ns",
        "container:foo=bar",
        "reserved:host",
    ]
    assert stable_labels(labels) == {"tier": "web"}


def test_priority_keys_win_then_all_stable_labels() -> None:
    assert select_labels(["k8s:app=web", "k8s:app.kubernetes.io/name=shop", "k8s:x=y"]) == (
        ("app.kubernetes.io/name", "shop"),
    )
    assert select_labels(["k8s:app=web", "k8s:app.kubernetes.io/component=api"]) == (
        ("app.kubernetes.io/component", "api"),
    )
    assert select_labels(["k8s:app=web", "k8s:version=v1"]) == (("app", "web"),)
    assert select_labels(["k8s:tier=backend", "k8s:team=platform"]) == (
        ("team", "platform"),
        ("tier", "backend"),
    )
    assert select_labels(["k8s:pod-template-hash=1"]) == ()


def test_workload_names() -> None:
    assert workload_name((("app", "web"),)) == "web"
    assert workload_name((("team", "platform"), ("tier", "backend"))) == "backend-platform"
    assert workload_name((("flag", ""),)) == "flag"
    assert workload_name(()) == ""


def test_reserved_names_in_label_order() -> None:
    assert reserved_names(["reserved:kube-apiserver", "k8s:a=b", "reserved:world"]) == (
        "kube-apiserver",
        "world",
    )
