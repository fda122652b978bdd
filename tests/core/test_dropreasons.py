from __future__ import annotations

from cpg_core._base.dropreasons import (
    CLASSIFIER_VERSION,
    DROP_REASONS,
    REASON_CODES,
    DropClass,
    classify_reason,
    reason_name,
)


def test_table_holds_every_cilium_1_19_reason() -> None:
    expected_codes = {0, *range(130, 159), *range(160, 206)}
    assert set(DROP_REASONS) == expected_codes
    assert len(DROP_REASONS) == 76
    assert len(REASON_CODES) == 76, "names must be unique"


def test_every_reason_has_a_class() -> None:
    for code, (name, cls) in DROP_REASONS.items():
        assert isinstance(cls, DropClass), (code, name)
        assert classify_reason(code) is cls


def test_the_reasons_that_matter_most() -> None:
    assert classify_reason(133) is DropClass.POLICY and reason_name(133) == "POLICY_DENIED"
    assert classify_reason(181) is DropClass.POLICY and reason_name(181) == "POLICY_DENY"
    assert classify_reason(189) is DropClass.POLICY and reason_name(189) == "AUTH_REQUIRED"
    assert classify_reason(177) is DropClass.POLICY
    assert classify_reason(155) is DropClass.INFRA and reason_name(155) == "CT_MAP_INSERTION_FAILED"
    assert classify_reason(158) is DropClass.INFRA
    assert classify_reason(203) is DropClass.TRANSIENT
    assert classify_reason(171) is DropClass.TRANSIENT
    assert classify_reason(174) is DropClass.NOISE
    assert classify_reason(205) is DropClass.NOISE
    # No reason given: a candidate flagged as unclassified, not a transient drop.
    assert classify_reason(0) is DropClass.UNKNOWN


def test_unknown_numbers_classify_as_unknown() -> None:
    for code in (1, 15, 129, 159, 206, 999, -1):
        assert classify_reason(code) is DropClass.UNKNOWN
    assert reason_name(999) == "DROP_REASON_999"


def test_class_counts_and_version() -> None:
    counts = {cls: 0 for cls in DropClass}
    for _, cls in DROP_REASONS.values():
        counts[cls] += 1
    assert counts[DropClass.POLICY] == 4
    assert counts[DropClass.NOISE] == 6
    assert counts[DropClass.UNKNOWN] == 1
    assert CLASSIFIER_VERSION.endswith("-cilium1.19.4")
