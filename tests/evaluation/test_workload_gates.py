"""The shipped evaluation workloads are in the regime that separates allocators (recomputed from the files)."""

import dataclasses

import numpy as np
import pytest

from studies.workload_report import TaskStats, format_report, gate_failures, gate_summaries


@pytest.fixture(scope="module")
def shipped():
    return gate_summaries()


def test_shipped_workloads_pass_every_gate(shipped):
    assert gate_failures(shipped) == []


def test_fifo_is_far_below_the_oracle_and_edf_too(shipped):
    for summary in shipped.values():
        assert summary.rates["clairvoyant"] <= summary.rates["oracle"] + 1e-9
        assert summary.rates["fifo"] < summary.rates["clairvoyant"] - 10
        assert summary.rates["edf"] < summary.rates["clairvoyant"] - 10


def test_the_report_names_every_family_row(shipped):
    text = format_report(shipped.values())
    for summary in shipped.values():
        for family in summary.families:
            assert f"| {summary.name} | {family} |" in text


def test_a_workload_where_fifo_keeps_up_fails_the_gap_gate(shipped):
    easy = {name: dataclasses.replace(s, rates={**s.rates, "fifo": s.rates["oracle"] - 5})
            for name, s in shipped.items()}
    assert any("FIFO is 5.0 points under the Oracle" in failure for failure in gate_failures(easy))


def test_a_family_of_trivial_tasks_fails_the_early_gate(shipped):
    name, summary = next(iter(shipped.items()))
    trivial = TaskStats()
    trivial.add(np.array([2, 3, 200, 0]), np.array([300, 300, 300, 300]))
    broken = dataclasses.replace(summary, families={**summary.families, "toy": trivial})
    failures = gate_failures({**shipped, name: broken})
    assert f"{name}/toy: 50.0 % of tasks met within 4 batches (> 5 %)" in failures
