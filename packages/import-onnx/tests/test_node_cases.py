"""Every ONNX node test case of every operator docs/onnx-operators.md lists as supported
passes, so the list cannot claim more than the importer does."""

from __future__ import annotations

from pathlib import Path

from burnish.onnx import node_tests

REPORT = Path(__file__).resolve().parents[3] / "docs" / "onnx-operators.md"


def test_the_report_lists_supported_operators():
    assert len(node_tests.read_supported(REPORT)) > 100


def test_every_case_of_the_supported_operators_passes():
    supported = set(node_tests.read_supported(REPORT))
    outcomes = node_tests.run(supported)
    assert {o.operator for o in outcomes} == supported
    problems = [f"{o.case} ({o.operator}): {o.status}: {o.detail}" for o in outcomes
                if o.status != node_tests.PASSED]
    assert not problems, "\n".join(problems)
