"""medexp.demo.build_trace: the op probes are deterministic, and a comparison names the first
entry where two machines' traces part ways (the tool meant to find issue 38's cause on real CPUs)."""

from __future__ import annotations

import copy
import json
from pathlib import Path

from medexp.demo.build_trace import compare, op_probes

REPO = Path(__file__).resolve().parents[2]
RECORDED = REPO / "docs" / "measurements" / "build-trace-amd-epyc-zen4.json"


def test_op_probes_repeat_bit_for_bit_in_one_process():
    assert op_probes() == op_probes()


def _recorded() -> dict:
    return json.loads(RECORDED.read_text(encoding="utf-8"))


def test_the_recorded_trace_is_complete():
    trace = _recorded()
    assert trace["machine"]["vendor"] == "AuthenticAMD" and trace["kernels"]["aten_capability"] == "DEFAULT"
    assert len(trace["steps"]) == 3 and set(trace["steps"][0]["weights"]) <= set(trace["init"])  # init: state_dict, tied weights included
    assert all(step["forward"] and step["grads"] for step in trace["steps"])


def test_identical_traces_compare_equal():
    trace = _recorded()
    lines = compare(trace, copy.deepcopy(trace))
    assert "probes: 0 of 20 differ" in lines and lines[-1] == "steps: the 3 traced steps are bit-identical"


def test_the_first_differing_forward_op_is_named():
    ours = _recorded()
    theirs = copy.deepcopy(ours)
    theirs["probes"]["matmul (BLAS sgemm)"] = "0" * 16
    name, _ = theirs["steps"][1]["forward"][5]
    theirs["steps"][1]["forward"][5] = [name, "f" * 16]
    theirs["steps"][1]["loss"] = "0x1p+0"  # later entries differ too: only the first is the cause
    lines = compare(ours, theirs)
    assert "probes: 1 of 20 differ (matmul (BLAS sgemm))" in lines
    assert lines[-1] == f"step 1: first difference at forward op 5 ({name}): {ours['steps'][1]['forward'][5][1]} vs {'f' * 16}"


def test_a_difference_in_the_weights_names_the_parameter():
    ours = _recorded()
    theirs = copy.deepcopy(ours)
    parameter = next(iter(theirs["steps"][2]["weights"]))
    theirs["steps"][2]["weights"][parameter] = "0" * 16
    assert compare(ours, theirs)[-1].startswith(f"step 2: first difference at weights {parameter}:")


def test_traces_of_other_settings_are_not_compared():
    ours = _recorded()
    theirs = copy.deepcopy(ours)
    theirs["settings"]["seed"] = 1
    assert compare(ours, theirs)[-1] == "the traces are of different build settings: not comparable"


def test_the_recorded_intel_and_amd_traces_part_at_the_square_root():
    """docs/portability.md's reading of the two real traces: identical data, initial weights and
    first step; only the square-root probes differ, and with them the weights after the first
    AdamW update."""
    intel = json.loads((RECORDED.parent / "build-trace-intel-xeon-6-207.json").read_text(encoding="utf-8"))
    assert intel["machine"]["vendor"] == "GenuineIntel" and intel["kernels"]["aten_capability"] == "DEFAULT"
    lines = compare(intel, _recorded())
    assert "probes: 2 of 20 differ (pow 0.5, adamw two steps)" in lines
    assert "data: 0 of 4 differ" in lines and "init: 0 of 64 differ" in lines
    assert lines[-1].startswith("step 1: first difference at forward op 0 (model.language_model.embed_tokens)")
    first, second = intel["steps"][0], _recorded()["steps"][0]
    assert first == second  # the whole first step, gradients included, before any update
