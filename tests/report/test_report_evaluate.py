"""Claim evaluation on hand-built runs: every status is reachable, corrections match hand computation."""

from __future__ import annotations

import math

import pytest

from medexp.report.cells import CellIndex
from medexp.report.claims import Claim, Evidence, Selection
from medexp.report.conditions import Condition
from medexp.report.evaluate import Outcome, evaluate_claim
from medexp.report.quantifiers import Quantifier
from tests.report.tracked_cells import tracked


def evidence(name: str, require: str, quantifier: str = "all", expect: int | None = None, **select) -> Evidence:
    axes = {axis: None for axis in ("model", "bench", "detector", "control")}
    axes.update({axis: (names,) if isinstance(names, str) else tuple(names)
                 for axis, names in select.items() if names is not None})
    return Evidence(name, Selection(**axes), Condition.parse(require), Quantifier.parse(quantifier), expect)


def claim(*items: Evidence, holds: str = "survives", fails: str = "collapses") -> Claim:
    return Claim("c", "A claim.", "§0", tuple(items), holds, fails)


def test_family_corrections_equal_hand_computed_bonferroni_and_bh():
    runs = [
        tracked("a", "b1", "exch_rank", "none", {"p_value": 0.001}),
        tracked("b", "b1", "exch_rank", "none", {"p_value": 0.02}),
        tracked("c", "b1", "exch_rank", "none", {"p_value": 0.04}),
        tracked("d", "b1", "exch_rank", "none", {"p_value": 0.9}),  # superseded below
        tracked("d", "b1", "exch_rank", "none", {"p_value": 0.5}),
        tracked("e", "b1", "exch_rank", "none", {}, status="FAILED", error="ValueError: boom"),
        tracked("a", "b1", "exch_rank", "order_hash", {"p_value": 0.3}),
        tracked("probe", "synthetic", "composition_sweep", "synthetic", {"false_positive_flag_prob_0": 0.0}),
    ]
    index = CellIndex.from_runs(runs)
    values = {cell.key: cell.values for cell in index.finished}
    release = {model: values[f"model={model},bench=b1,detector=exch_rank,control=none"] for model in "abcd"}
    # m = 4 finished release cells (the newer run of d replaces the older; the failed e has no p)
    assert [release[m]["p_bonferroni"] for m in "abcd"] == pytest.approx([0.004, 0.08, 0.16, 1.0])
    # BH by hand: sorted p 0.001, 0.02, 0.04, 0.5 -> p m / rank = 0.004, 0.04, 0.0533, 0.5, then
    # the running minimum from the largest rank down leaves them unchanged
    assert [release[m]["q_bh"] for m in "abcd"] == pytest.approx([0.004, 0.04, 0.04 * 4 / 3, 0.5])
    assert {release[m]["family_size"] for m in "abcd"} == {4.0}
    hash_cell = values["model=a,bench=b1,detector=exch_rank,control=order_hash"]
    assert (hash_cell["p_bonferroni"], hash_cell["q_bh"], hash_cell["family_size"]) == (0.3, 0.3, 1.0)
    descriptive = values["model=probe,bench=synthetic,detector=composition_sweep,control=synthetic"]
    assert "p_bonferroni" not in descriptive
    assert [cell.key for cell in index.unfinished] == ["model=e,bench=b1,detector=exch_rank,control=none"]
    table = index.frame().set_index("cell_key")
    assert table.loc["model=d,bench=b1,detector=exch_rank,control=none", "p_value"] == 0.5
    assert table.loc["model=e,bench=b1,detector=exch_rank,control=none", "error"] == "ValueError: boom"


def test_bh_q_values_take_the_running_minimum():
    # p 0.01, 0.011, 0.9 -> p m / rank = 0.03, 0.0165, 0.9 -> q = 0.0165, 0.0165, 0.9
    index = CellIndex.from_runs([tracked(m, "b", "exch", "none", {"p_value": p})
                                 for m, p in (("x", 0.01), ("y", 0.011), ("z", 0.9))])
    assert [cell.values["q_bh"] for cell in index.finished] == pytest.approx([0.0165, 0.0165, 0.9])


RUNS = [
    tracked("qwen", "slake", "exch_rank", "none", {"p_value": 0.0005, "flag": 1.0}),
    tracked("qwen", "slake", "exch_rank", "order_hash", {"p_value": 0.68, "flag": 0.0}),
    tracked("blip2", "slake", "exch_rank", "none", {"p_value": 0.31, "flag": 0.0}),
    tracked("instructblip", "slake", "exch_rank", "none", {"p_value": 0.97, "flag": 0.0}),
    tracked("llava", "slake", "exch_rank", "none", {}, status="FAILED", error="OSError: no such checkpoint"),
    tracked("m", "slake", "image_nn-b16", "none", {"p_value": 1e-9, "image_flag_rate": math.nan}),
]


def test_a_claim_holds_when_every_item_holds_and_cites_its_runs():
    index = CellIndex.from_runs(RUNS)
    result = evaluate_claim(claim(
        evidence("release", "p_bonferroni < 0.05", model="qwen", bench="slake", detector="exch_rank", control="none"),
        evidence("hash", "p_value > 0.1", model="qwen", bench="slake", detector="exch_rank", control="order_hash"),
        evidence("baselines", "p_value > 0.05", model=["blip2", "instructblip"], bench="slake", detector="exch_rank",
                 control="none"),
    ), index)
    assert result.outcome is Outcome.holds and result.status == "survives"
    release, _, baselines = result.items
    # three release cells of exch_rank finished (llava's failed), so Bonferroni multiplies by 3
    assert release.checks[0].values == {"p_bonferroni": pytest.approx(0.0015)}
    assert release.checks[0].cell.run_id == RUNS[0].run_id
    assert [check.cell.model for check in baselines.checks] == ["blip2", "instructblip"]
    assert all(check.met for item in result.items for check in item.checks)
    assert not any(item.missing for item in result.items)


def test_a_claim_fails_when_an_item_fails():
    result = evaluate_claim(claim(
        evidence("release", "p_value < 0.01", model="qwen", bench="slake", detector="exch_rank", control="none"),
        evidence("hash", "p_value < 0.01", model="qwen", bench="slake", detector="exch_rank", control="order_hash"),
    ), CellIndex.from_runs(RUNS))
    assert result.outcome is Outcome.fails and result.status == "collapses"
    assert [item.outcome for item in result.items] == [Outcome.holds, Outcome.fails]
    assert result.items[1].checks[0].met is False


def test_quantifier_any_needs_one_cell():
    index = CellIndex.from_runs(RUNS)
    some = evidence("one", "p_value > 0.9", "any", model=["blip2", "instructblip"], detector="exch_rank", control="none")
    none = evidence("none", "p_value > 0.99", "any", model=["blip2", "instructblip"], detector="exch_rank", control="none")
    assert evaluate_claim(claim(some), index).outcome is Outcome.holds
    assert evaluate_claim(claim(none), index).outcome is Outcome.fails
    every = evidence("all", "p_value > 0.9", model=["blip2", "instructblip"], detector="exch_rank", control="none")
    assert evaluate_claim(claim(every), index).outcome is Outcome.fails


def test_quantifier_sign_test_needs_more_cells_than_chance():
    """The audit's cross-cell evidence: the sign of a per-cell statistic, tested over the cells."""
    from medexp.report.quantifiers import sign_test_p

    runs = [tracked(f"m{i}", "ham", "memorization", "none", {"rarity_spearman_rho": rho})
            for i, rho in enumerate([-0.4, -0.3, -0.15, -0.2, -0.1, 0.05])]
    index = CellIndex.from_runs(runs)
    rare = evidence("rarity", "rarity_spearman_rho < 0", "sign_test", bench="ham", detector="memorization")
    # 5 of 6 cells negative: one-sided p = (6 + 1) / 64 = 0.109, not below 0.05
    assert sign_test_p(5, 6) == pytest.approx(7 / 64)
    assert evaluate_claim(claim(rare), index).outcome is Outcome.fails
    more = CellIndex.from_runs(runs + [tracked(f"n{i}", "ham", "memorization", "none", {"rarity_spearman_rho": -0.2})
                                       for i in range(4)])
    # 9 of 10: p = 11 / 1024
    assert sign_test_p(9, 10) == pytest.approx(11 / 1024)
    assert evaluate_claim(claim(rare), more).outcome is Outcome.holds


def test_missing_cells_are_named_and_a_failed_runs_error_is_surfaced():
    index = CellIndex.from_runs(RUNS)
    result = evaluate_claim(claim(
        evidence("fails_anyway", "p_value < 0.01", model="blip2", bench="slake", detector="exch_rank", control="none"),
        evidence("never_run", "p_value > 0.1", model="qwen", bench=["slake", "vqa_rad"], detector="exch_rank",
                 control="none"),
        evidence("crashed", "p_value < 0.01", model="llava", bench="slake", detector="exch_rank", control="none"),
    ), index)
    # a failing item does not decide the claim while other evidence is missing
    assert result.outcome is Outcome.no_evidence and result.status == "no evidence"
    never_run, crashed = result.items[1], result.items[2]
    assert [check.cell.bench for check in never_run.checks] == ["slake"]
    (missing,) = never_run.missing
    assert (missing.cell_key, missing.reason, missing.attempts) == (
        "model=qwen,bench=vqa_rad,detector=exch_rank,control=none", "no tracked run", ())
    (missing,) = crashed.missing
    assert missing.reason == "no FINISHED run (latest: FAILED)"
    assert [(a.run_id, a.error) for a in missing.attempts] == [(RUNS[4].run_id, "OSError: no such checkpoint")]


def test_a_cell_lacking_a_value_or_holding_nan_is_no_evidence():
    index = CellIndex.from_runs(RUNS)
    lacking = evaluate_claim(claim(evidence("x", "flag == 1 and baseline_blip2_flag == 1", model="qwen",
                                            control="none")), index)
    (missing,) = lacking.items[0].missing
    assert missing.cell_key == "model=qwen,bench=slake,detector=exch_rank,control=none"
    assert missing.reason == f"run {RUNS[0].run_id} has no value for baseline_blip2_flag"
    nan = evaluate_claim(claim(evidence("y", "image_flag_rate < 0.01", detector="image_nn-b16")), index)
    assert nan.outcome is Outcome.no_evidence and "image_flag_rate" in nan.items[0].missing[0].reason


def test_a_wildcard_axis_needs_at_least_one_run_and_reads_every_match():
    index = CellIndex.from_runs(RUNS)
    found = evaluate_claim(claim(evidence("any_model", "p_value > 0.05", model=None, bench="slake",
                                          detector="exch_rank", control="none")), index)
    assert sorted(check.cell.model for check in found.items[0].checks) == ["blip2", "instructblip", "qwen"]
    assert found.outcome is Outcome.fails  # qwen's release p is 0.0005
    empty = evaluate_claim(claim(evidence("nothing", "p_value > 0.05", bench="pathvqa")), index)
    assert empty.items[0].missing[0].cell_key == "model=*,bench=pathvqa,detector=*,control=*"


def test_the_latest_finished_run_counts_even_after_a_newer_failure():
    runs = [tracked("m", "b", "exch", "none", {"p_value": 0.5}),
            tracked("m", "b", "exch", "none", {}, status="FAILED", error="RuntimeError: out of memory")]
    index = CellIndex.from_runs(runs)
    assert [cell.run_id for cell in index.finished] == [runs[0].run_id] and not index.unfinished
    assert evaluate_claim(claim(evidence("x", "p_value > 0.1", model="m")), index).outcome is Outcome.holds


def test_percentile_compares_the_selected_cells_with_each_other():
    # MedVIGIL's "accuracy does not imply safety": some model in the top half by accuracy is in
    # the bottom half by Safe. Ranks by hand: acc a 90 > b 80 > c 50 > d 40 (shares 1, 2/3, 1/3, 0);
    # safe b 20 < d 30 < a 60 < c 70 (b 0, d 1/3, a 2/3, c 1): b is top half and bottom half.
    metrics = {"a": (90, 60), "b": (80, 20), "c": (50, 70), "d": (40, 30)}
    runs = [tracked(m, "mv", "medvigil", "none", {"acc": acc, "safe": safe}) for m, (acc, safe) in metrics.items()]
    rule = "percentile(acc) >= 0.5 and percentile(safe) < 0.5"
    result = evaluate_claim(claim(evidence("split", rule, "any", detector="medvigil")), CellIndex.from_runs(runs))
    assert result.outcome is Outcome.holds
    checks = {check.cell.model: check for check in result.items[0].checks}
    assert [m for m, check in checks.items() if check.met] == ["b"]
    assert checks["a"].values["percentile(acc)"] == 1 and checks["d"].values["percentile(safe)"] == pytest.approx(1 / 3)
    # Aligned axes: the accurate models are also the safe ones, so the rule fails.
    aligned = [tracked(m, "mv", "medvigil", "none", {"acc": acc, "safe": acc}) for m, (acc, _) in metrics.items()]
    assert evaluate_claim(claim(evidence("split", rule, "any", detector="medvigil")),
                          CellIndex.from_runs(aligned)).outcome is Outcome.fails


def test_percentile_needs_every_selected_cell_and_at_least_two():
    rule = "percentile(acc) >= 0.5"
    one = [tracked("a", "mv", "medvigil", "none", {"acc": 1.0})]
    result = evaluate_claim(claim(evidence("rank", rule, "any", detector="medvigil")), CellIndex.from_runs(one))
    assert result.outcome is Outcome.no_evidence and "at least two" in result.items[0].missing[0].reason
    gap = one + [tracked("b", "mv", "medvigil", "none", {"acc": 2.0}), tracked("c", "mv", "medvigil", "none", {})]
    result = evaluate_claim(claim(evidence("rank", rule, "any", detector="medvigil")), CellIndex.from_runs(gap))
    # c has no accuracy, so a and b cannot be ranked among the three: no checks, no evidence
    assert result.outcome is Outcome.no_evidence and result.items[0].checks == ()


def _answering(model: str, p_value: float, mde: float, alpha: float = 0.01):
    return tracked(model, "demo", "option_order", "none",
                   {"p_value": p_value, "flag": float(p_value < alpha), "mde": mde})


def test_a_claim_naming_an_effect_is_underpowered_where_a_cell_could_not_show_it():
    """A clean cell not flagged with an MDE of 0.12 against a claimed effect of 0.05 could not have
    flagged a 5-point inflation: "clean" rests on it, so the claim is underpowered, not holding;
    the same cell with MDE 0.04 decides the claim; a significant cell is never underpowered."""
    index = CellIndex.from_runs([_answering("clean", 0.4, 0.12), _answering("powered", 0.4, 0.04),
                                 _answering("leaky", 0.001, 0.12)])
    clean = evidence("clean", "p_value >= 0.01", model="clean", detector="option_order")
    with_effect = Claim("c", "A claim.", "§0", (clean,), "clean control", "not clean", effect=0.05)
    result = evaluate_claim(with_effect, index)
    assert result.outcome is Outcome.underpowered and result.status == "underpowered (MDE 0.12 > effect 0.05)"
    assert result.items[0].checks[0].met and result.items[0].checks[0].underpowered == result.status
    assert "underpowered" in with_effect.describe()
    # without an effect the same cells decide as before
    assert evaluate_claim(claim(clean), index).outcome is Outcome.holds
    powered = evidence("clean", "p_value >= 0.01", model="powered", detector="option_order")
    assert evaluate_claim(Claim("c", "A.", "", (powered,), "h", "f", effect=0.05), index).outcome is Outcome.holds
    leaky = evidence("leaky", "p_value < 0.01", model="leaky", detector="option_order")
    decided = evaluate_claim(Claim("c", "A.", "", (leaky,), "h", "f", effect=0.05), index)
    assert decided.outcome is Outcome.holds and decided.items[0].checks[0].underpowered is None


def test_underpowered_cells_that_cannot_change_the_outcome_leave_it_decided():
    """At least 1 of 2 flagged: the leaky cell's flag decides, whatever the underpowered one would show;
    a failing item elsewhere makes the claim fail, not underpowered."""
    index = CellIndex.from_runs([_answering("leaky", 0.001, 0.12), _answering("weak", 0.4, 0.12),
                                 _answering("clean", 0.001, 0.04)])
    any_flag = evidence("any", "flag == 1", "any", model=["leaky", "weak"], detector="option_order")
    weak = evidence("weak", "flag == 1", model="weak", detector="option_order")
    failing = evidence("clean_not_flagged", "flag == 0", model="clean", detector="option_order")
    result = evaluate_claim(Claim("c", "A.", "", (any_flag, weak), "h", "f", effect=0.05), index)
    assert [item.outcome for item in result.items] == [Outcome.holds, Outcome.underpowered]
    assert result.outcome is Outcome.underpowered
    result = evaluate_claim(Claim("c", "A.", "", (weak, failing), "h", "f", effect=0.05), index)
    assert [item.outcome for item in result.items] == [Outcome.underpowered, Outcome.fails]
    assert result.outcome is Outcome.fails and result.status == "f"


def _membership(model: str, p_value: float, shift_auc: float, shift_p_value: float, alpha: float = 0.01):
    return tracked(model, "demo", "membership", "none",
                   {"p_value": p_value, "flag": float(p_value < alpha), "shift_auc": shift_auc,
                    "shift_p_value": shift_p_value, "shift_confounded": float(shift_p_value < alpha)})


def test_a_claim_resting_on_a_cell_whose_inputs_alone_separate_its_groups_is_confounded():
    """Both leaky cells are flagged, but on "shifted" an inputs-only classifier also tells members
    from non-members (shift AUC 0.93): the claim is confounded, naming the largest shift AUC;
    without the shifted cell it holds; a failing claim stays failing, a missing cell no evidence."""
    index = CellIndex.from_runs([_membership("leaky", 1e-4, 0.52, 0.3), _membership("shifted", 1e-4, 0.93, 0.002),
                                 _membership("worse", 1e-4, 0.97, 0.002), _membership("clean", 0.4, 0.99, 0.002)])
    both = evidence("detected", "flag == 1", model=["leaky", "shifted"], detector="membership")
    result = evaluate_claim(claim(both), index)
    expected = "confounded (inputs alone tell members from non-members: shift AUC 0.93)"
    assert result.outcome is Outcome.confounded and result.status == expected
    assert result.items[0].outcome is Outcome.confounded
    checks = {check.cell.model: check for check in result.items[0].checks}
    assert checks["leaky"].confounded is None and checks["shifted"].confounded == expected and checks["shifted"].met
    assert evaluate_claim(claim(evidence("detected", "flag == 1", model="leaky", detector="membership")),
                          index).status == "survives"
    # two confounded cells in two items: the larger shift AUC is named
    worse = evidence("worse", "flag == 1", model="worse", detector="membership")
    assert evaluate_claim(claim(both, worse), index).status.endswith("shift AUC 0.97)")
    # the claim fails on "clean" (not flagged): confounded or not, it does not hold
    failing = evaluate_claim(claim(both, evidence("clean", "flag == 1", model="clean", detector="membership")), index)
    assert failing.outcome is Outcome.fails and failing.status == "collapses"
    absent = evaluate_claim(claim(both, evidence("gone", "flag == 1", model="gone", detector="membership")), index)
    assert absent.outcome is Outcome.no_evidence


def test_cells_without_a_shift_control_are_never_confounded():
    index = CellIndex.from_runs([_answering("leaky", 0.001, 0.12)])
    result = evaluate_claim(claim(evidence("leaky", "p_value < 0.01", model="leaky", detector="option_order")), index)
    assert result.outcome is Outcome.holds and result.items[0].checks[0].confounded is None


def test_a_claim_none_of_whose_cells_ran_is_not_run_and_one_whose_cells_ran_without_evidence_is_not():
    index = CellIndex.from_runs([
        tracked("a", "b", "exch_rank", "none", {"p_value": 0.5}),
        tracked("e", "b", "exch_rank", "none", {}, status="FAILED", error="ValueError: boom"),
    ])
    never = evaluate_claim(claim(
        evidence("x", "p_value < 0.01", model="z", bench="b", detector="exch_rank", control="none"),
        evidence("y", "p_value > 0.1", model="z_s*", bench="*", detector="exch", control="none")), index)
    assert never.outcome is Outcome.not_run and never.status == "not run"
    assert [missing.reason for item in never.items for missing in item.missing] == ["no tracked run"] * 2
    # a failed run is a cell that ran: its claim has no evidence, naming the error
    failed = evaluate_claim(claim(evidence("x", "p_value < 0.01", model="e", bench="b", detector="exch_rank",
                                           control="none")), index)
    assert failed.outcome is Outcome.no_evidence and failed.items[0].missing[0].attempts[0].error == "ValueError: boom"
    # one item ran, the other did not: no evidence, not "not run"
    partly = evaluate_claim(claim(
        evidence("x", "p_value > 0.1", model="a", bench="b", detector="exch_rank", control="none"),
        evidence("y", "p_value > 0.1", model="z", bench="b", detector="exch_rank", control="none")), index)
    assert partly.outcome is Outcome.no_evidence
    # a finished cell without the value the rule reads ran too
    unread = evaluate_claim(claim(evidence("x", "gap > 0", model="a", bench="b", detector="exch_rank",
                                           control="none")), index)
    assert unread.outcome is Outcome.no_evidence
