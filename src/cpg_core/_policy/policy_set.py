"""A folder of policies read once and indexed the way Cilium's repository answers: the
policies that can select an endpoint are its namespace's and the clusterwide ones (a
namespaced policy selects only its own namespace's pods), the ClusterNetworkPolicies of a
tier in the order they are judged, and what was worked out for an endpoint kept for the run.

Every judging function takes a plain sequence of documents or a PolicySet: given a set, the
matcher asks it (an index lookup and a memo) instead of scanning every policy for every
flow, which made the review commands quadratic in the size of the cluster."""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterable, Iterator, Sequence
from typing import Any, TypeVar, overload

from cpg_core._base.documents import PolicyDocument
from cpg_core._policy.model import Policy, policy_model

MEMO_LIMIT = 65536
"""Answers kept per set at most; all are forgotten together when there are more (a long
shadow session sees endless endpoints)."""

_T = TypeVar("_T")


class PolicySet(Sequence[PolicyDocument]):
    """Policy documents with their indexes; a read-only sequence of the documents (in the
    order given) for whatever reads them all."""

    __slots__ = ("_all", "_by_namespace", "_clusterwide", "_memo", "_models")

    def __init__(self, policies: Iterable[PolicyDocument]) -> None:
        self._all: list[PolicyDocument] = list(policies)
        self._models: list[Policy] = [policy_model(doc) for doc in self._all]
        self._by_namespace: dict[str, list[Policy]] = {}
        self._clusterwide: list[Policy] = []
        self._memo: dict[Hashable, Any] = {}
        for model in self._models:
            if model.namespace is None:
                self._clusterwide.append(model)
            else:
                self._by_namespace.setdefault(model.namespace, []).append(model)

    @classmethod
    def of(cls, policies: Iterable[PolicyDocument]) -> PolicySet:
        """``policies`` as a set (itself when it is one)."""
        return policies if isinstance(policies, PolicySet) else cls(policies)

    @overload
    def __getitem__(self, index: int) -> PolicyDocument: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[PolicyDocument]: ...
    def __getitem__(self, index: int | slice) -> PolicyDocument | Sequence[PolicyDocument]:
        return self._all[index]

    def __len__(self) -> int:
        return len(self._all)

    def __iter__(self) -> Iterator[PolicyDocument]:
        return iter(self._all)

    @property
    def models(self) -> Sequence[Policy]:
        """Every policy, read (in the order given)."""
        return self._models

    def models_near(self, namespace: str) -> list[Policy]:
        """The policies that can select a pod of ``namespace`` (a new list)."""
        return self._by_namespace.get(namespace, []) + self._clusterwide

    def near(self, namespace: str) -> list[PolicyDocument]:
        """The documents of :meth:`models_near`."""
        return [model.document for model in self.models_near(namespace)]

    def namespaced(self, namespace: str) -> list[PolicyDocument]:
        """The CiliumNetworkPolicies of ``namespace``."""
        return [model.document for model in self._by_namespace.get(namespace, ())]

    @property
    def clusterwide(self) -> list[PolicyDocument]:
        """Every document that is not a CiliumNetworkPolicy."""
        return [model.document for model in self._clusterwide]

    def remembered(self, key: Hashable, work: Callable[[], _T]) -> _T:
        """``work()``, kept under ``key`` for the set's life (bounded by MEMO_LIMIT)."""
        memo = self._memo
        try:
            return memo[key]  # type: ignore[no-any-return]
        except KeyError:
            pass
        if len(memo) >= MEMO_LIMIT:
            memo.clear()
        value = memo[key] = work()
        return value
