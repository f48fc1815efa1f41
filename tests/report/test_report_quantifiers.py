"""Counting quantifiers, the expected number of cells and glob selections, on hand-built replicate runs."""

from __future__ import annotations

from fractions import Fraction

import pytest

from medexp.report.cells import CellIndex
from medexp.report.claims import Claim, Evidence, Selection
from medexp.report.conditions import Condition
from medexp.report.document import to_markdown
from medexp.report.evaluate import Outcome, evaluate_claim
from medexp.report.quantifiers import Quantifier, QuantifierError
from medexp.report.render import ReportContext, latex_table, report_blocks
from tests.report.tracked_cells import tracked, tracked_replicate

SEEDS = range(10, 20)


@pytest.mark.parametrize(("text", "kind", "bound"), [
    ("all", "all", None), ("any", "any", None), ("sign_test", "sign_test", None),
    ("at_least 9", "at_least", Fraction(9)), ("at_most  0", "at_most", Fraction(0)),
    ("fraction_at_least 0.9", "fraction_at_least", Fraction(9, 10)),
    ("fraction_at_most 1", "fraction_at_most", Fraction(1)),
])
def test_every_quantifier_form_parses(text, kind, bound):
    quantifier = Quantifier.parse(text)
    assert (quantifier.kind, quantifier.bound) == (kind, bound)
    assert Quantifier.parse(str(quantifier)) == quantifier  # its text reads back


@pytest.mark.parametrize(("text", "message"), [
    ("most", "'most' is not one of all, any, sign_test"),
    ("at_least", "is not one of"),
    ("at_least nine", "'nine' is not a number"),
    ("at_least 1.5", "K must be a whole number"),
    ("at_most -1", "K must be a whole number"),
    ("fraction_at_least 0", "F must be a share in \\(0, 1\\]"),
    ("fraction_at_most 1.5", "F must be a share"),
    (9, "9 is not one of"),
])
def test_a_bad_quantifier_names_the_allowed_forms(text, message):
    with pytest.raises(QuantifierError, match=message):
        Quantifier.parse(text)


@pytest.mark.parametrize(("text", "met", "cells", "holds"), [
    ("all", 10, 10, True), ("all", 9, 10, False), ("any", 1, 10, True), ("any", 0, 10, False),
    ("at_least 9", 9, 10, True), ("at_least 9", 8, 10, False),
    ("at_most 1", 1, 10, True), ("at_most 1", 2, 10, False), ("at_most 0", 0, 10, True),
    # shares are compared exactly: 0.7 x 10 is 7 (in floating point 7.000000000000001)
    ("fraction_at_least 0.7", 7, 10, True), ("fraction_at_least 0.7", 6, 10, False),
    ("fraction_at_most 0.2", 2, 10, True), ("fraction_at_most 0.2", 3, 10, False),
    ("sign_test", 9, 10, True), ("sign_test", 8, 10, False),  # p = 11/1024; 56/1024
])
def test_each_quantifier_counts_the_cells_meeting_the_condition(text, met, cells, holds):
    assert Quantifier.parse(text).holds(met, cells) is holds


def test_a_counting_quantifier_needs_an_expected_count_it_can_meet():
    with pytest.raises(QuantifierError, match="counts cells: state how many .* with 'expect'"):
        Quantifier.parse("at_least 9").check_expected(None)
    with pytest.raises(QuantifierError, match="K must be between 1 and 10"):
        Quantifier.parse("at_least 11").check_expected(10)
    with pytest.raises(QuantifierError, match="always holds: K must be below 10"):
        Quantifier.parse("at_most 10").check_expected(10)
    Quantifier.parse("fraction_at_most 0.1").check_expected(10)
    Quantifier.parse("all").check_expected(None)  # all, any and sign_test may go without
    assert Quantifier.parse("at_least 9").describe(10) == "at least 9 of the 10 expected cells"
    assert Quantifier.parse("fraction_at_most 0.2").describe(10) == "at most a share 0.2 of the 10 expected cells"


def item(name: str, require: str, quantifier: str, expect: int | None = 10, **select) -> Evidence:
    axes = {axis: None for axis in ("model", "bench", "detector", "control")}
    axes.update({axis: (names,) if isinstance(names, str) else tuple(names) for axis, names in select.items()})
    return Evidence(name, Selection(**axes), Condition.parse(require), Quantifier.parse(quantifier), expect)


def claim(*items: Evidence) -> Claim:
    return Claim("c", "A replicate claim.", "demo", tuple(items), "confirmed", "refuted")


def exch_runs(leaky_flagged: int, clean_flagged: int, seeds=SEEDS) -> list:
    """One exch release-order cell per arm and seed; the first ``*_flagged`` seeds of an arm have p = 1e-4."""
    runs = []
    for arm, flagged in (("leaky", leaky_flagged), ("clean", clean_flagged)):
        for position, seed in enumerate(seeds):
            runs.append(tracked_replicate(arm, seed, "exch", "none", {"p_value": 1e-4 if position < flagged else 0.4}))
    return runs


LEAKY = item("leaky_detected", "p_bonferroni < 0.01", "at_least 9", model="demo_leaky_e30_s*", detector="exch")
CLEAN = item("clean_not_detected", "p_bonferroni < 0.01", "at_most 1", model="demo_clean_s*", detector="exch")


def test_a_replicate_claim_holds_with_9_of_10_leaky_and_1_of_10_clean_flagged():
    result = evaluate_claim(claim(LEAKY, CLEAN), CellIndex.from_runs(exch_runs(9, 1)))
    assert result.outcome is Outcome.holds and result.status == "confirmed"
    leaky, clean = result.items
    assert (leaky.met, len(leaky.checks), clean.met, len(clean.checks)) == (9, 10, 1, 10)
    # the replicates' families hold one clean and one leaky model each: Bonferroni x 2
    assert leaky.checks[0].values == {"p_bonferroni": pytest.approx(2e-4)}
    assert {check.cell.model for check in clean.checks} == {f"demo_clean_s{seed}" for seed in SEEDS}


@pytest.mark.parametrize(("leaky", "clean", "failing"), [(8, 0, "leaky_detected"), (10, 2, "clean_not_detected")])
def test_a_replicate_claim_fails_one_count_short(leaky, clean, failing):
    result = evaluate_claim(claim(LEAKY, CLEAN), CellIndex.from_runs(exch_runs(leaky, clean)))
    assert result.outcome is Outcome.fails and result.status == "refuted"
    assert [entry.evidence.name for entry in result.items if entry.outcome is Outcome.fails] == [failing]


def test_a_half_finished_sweep_is_no_evidence_even_when_every_cell_meets_the_rule():
    """9 of 9 finished leaky replicates, one still running: not "at least 9 of 10"."""
    runs = exch_runs(9, 0, seeds=range(10, 19))
    runs += [tracked_replicate("clean", 19, "exch", "none", {"p_value": 0.5}),
             tracked_replicate("leaky", 19, "exch", "none", {}, status="RUNNING")]
    result = evaluate_claim(claim(LEAKY, CLEAN), CellIndex.from_runs(runs))
    leaky, clean = result.items
    assert result.outcome is Outcome.no_evidence and clean.outcome is Outcome.holds
    assert leaky.met == len(leaky.checks) == 9
    (missing,) = leaky.missing
    assert missing.cell_key == "model=demo_leaky_e30_s*, bench=any, detector=exch, control=any"
    assert missing.reason == "9 of the 10 expected cells have a finished run; 1 selected cells never finished"
    assert [(attempt.model, attempt.status) for attempt in missing.attempts] == [("demo_leaky_e30_s19", "RUNNING")]


def test_a_failed_replicate_is_named_with_its_error():
    runs = exch_runs(10, 0)
    runs = [run for run in runs if run.tags["medexp.model"] != "demo_clean_s14"]
    runs.append(tracked_replicate("clean", 14, "exch", "none", {}, status="FAILED", error="RuntimeError: out of memory"))
    (clean,) = evaluate_claim(claim(CLEAN), CellIndex.from_runs(runs)).items
    (missing,) = clean.missing
    assert missing.reason.startswith("9 of the 10 expected cells")
    assert [(a.model, a.error) for a in missing.attempts] == [("demo_clean_s14", "RuntimeError: out of memory")]


def test_more_cells_than_expected_is_no_evidence():
    """An eleventh clean replicate (another seed): the claim's "of 10" no longer describes the data."""
    runs = exch_runs(9, 0) + [tracked_replicate("clean", 20, "exch", "none", {"p_value": 0.3})]
    (clean,) = evaluate_claim(claim(CLEAN), CellIndex.from_runs(runs)).items
    assert clean.outcome is Outcome.no_evidence
    assert clean.missing[0].reason.startswith("11 finished cells match, the claim expects 10")


def test_no_replicate_at_all_names_the_pattern():
    (leaky,) = evaluate_claim(claim(LEAKY), CellIndex.from_runs(exch_runs(0, 0)[10:])).items
    assert [(entry.cell_key, entry.reason) for entry in leaky.missing] == [
        ("model=demo_leaky_e30_s*,bench=*,detector=exch,control=*", "no tracked run"),
        ("model=demo_leaky_e30_s*, bench=any, detector=exch, control=any", "0 of the 10 expected cells have a finished run"),
    ]


def test_patterns_select_replicates_only_and_overlapping_patterns_count_a_cell_once():
    runs = exch_runs(9, 0) + [tracked("demo_clean", "demo", "exch", "none", {"p_value": 0.2}),
                              tracked("demo_leaky", "demo", "exch", "none", {"p_value": 1e-5})]
    index = CellIndex.from_runs(runs)
    (clean,) = evaluate_claim(claim(CLEAN), index).items
    assert "demo_clean" not in {check.cell.model for check in clean.checks} and clean.outcome is Outcome.holds
    # a list mixing a name and two overlapping patterns: 10 replicates + demo_clean, each once
    mixed = item("mixed", "p_value < 0.01", "at_most 1", expect=11,
                 model=["demo_clean", "demo_clean_s*", "demo_clean_s1?"], detector="exch")
    (result,) = evaluate_claim(claim(mixed), index).items
    assert len(result.checks) == 11 and result.outcome is Outcome.holds
    # character classes and single-character wildcards: seeds 10-14
    low = item("low_seeds", "p_value < 0.01", "fraction_at_least 0.8", expect=5,
               model="demo_leaky_e30_s1[0-4]", detector="exch")
    (result,) = evaluate_claim(claim(low), index).items
    assert sorted(check.cell.model for check in result.checks) == [f"demo_leaky_e30_s{seed}" for seed in range(10, 15)]
    assert result.outcome is Outcome.holds


def test_the_report_shows_the_count_and_the_rule():
    result = evaluate_claim(claim(LEAKY, CLEAN), CellIndex.from_runs(exch_runs(9, 1)))
    context = ReportContext("medexp", "sqlite:///x", "r1", "now")
    markdown = to_markdown(report_blocks([result], CellIndex.from_runs(exch_runs(9, 1)), [], context, {}, ["cells.csv"]))
    assert "Count: 9 of 10 cells meet `p_bonferroni < 0.01`." in markdown
    assert ("Rule: `p_bonferroni < 0.01` holds on at least 9 of the 10 expected cells "
            "(model=demo\\_leaky\\_e30\\_s\\*, bench=any, detector=exch, control=any).") in markdown
    assert "Count: 1 of 10 cells meet `p_bonferroni < 0.01`." in markdown
    assert "holds on at most 1 of the 10 expected cells" in markdown
    latex = latex_table([result], context)
    assert r"\emph{leaky\_detected} (holds; 9 of 10 cells meet the condition)" in latex
