"""Runs of one cell key with other settings: the report keeps the latest run of each settings, shows
them side by side with the params that differ, corrects over both and lets a claim see both."""

from __future__ import annotations

from medexp.report.cells import CellIndex
from medexp.report.claims import Claim, Evidence, Selection
from medexp.report.conditions import Condition
from medexp.report.document import to_markdown
from medexp.report.evaluate import evaluate_claim
from medexp.report.quantifiers import Quantifier
from medexp.report.render import ReportContext, report_blocks
from tests.report.tracked_cells import tracked

CELL = ("qwen", "slake", "exch_rank", "none")


def _params(permutations: int, seed: int = 0) -> dict[str, str]:
    return {"detector.permutations": str(permutations), "seed": str(seed), "paths.cache_dir": f"/cache{permutations}"}


def test_a_rerun_replaces_its_run_and_other_settings_stand_beside_it():
    first = tracked(*CELL, {"p_value": 0.04}, settings="aaaa", params=_params(250), run_id="first")
    rerun = tracked(*CELL, {"p_value": 0.03}, settings="aaaa", params=_params(250), run_id="rerun")
    other = tracked(*CELL, {"p_value": 0.0001}, settings="bbbb", params=_params(5000), run_id="other")
    index = CellIndex.from_runs([first, rerun, other])
    assert [(cell.run_id, cell.settings) for cell in index.finished] == [("rerun", "aaaa"), ("other", "bbbb")]
    # what sets them apart: the setting, not where their files lived (a run-neutral section)
    assert [dict(cell.differs) for cell in index.finished] == [{"detector.permutations": "250"},
                                                                {"detector.permutations": "5000"}]
    # two tests were run: both join the family the report corrects over
    assert [cell.values["family_size"] for cell in index.finished] == [2.0, 2.0]
    frame = index.frame()
    assert list(frame["settings"]) == ["aaaa", "bbbb"]
    assert list(frame["differs"]) == ["detector.permutations=250", "detector.permutations=5000"]


def test_a_key_run_one_way_names_no_difference():
    index = CellIndex.from_runs([tracked(*CELL, {"p_value": 0.2}, settings="aaaa", params=_params(250))])
    (cell,) = index.finished
    assert cell.differs == {} and cell.describe_differences() == ""


def test_runs_tracked_before_settings_were_tagged_give_way_to_tagged_runs_of_their_key():
    old = tracked(*CELL, {"p_value": 0.5}, run_id="old")  # no medexp.settings tag
    new = tracked(*CELL, {"p_value": 0.4}, settings="aaaa", run_id="new")
    assert [cell.run_id for cell in CellIndex.from_runs([old, new]).finished] == ["new"]
    alone = tracked("blip2", "slake", "exch_rank", "none", {"p_value": 0.5}, run_id="alone")
    assert [cell.run_id for cell in CellIndex.from_runs([alone, new]).finished] == ["alone", "new"]


def test_an_unfinished_run_of_other_settings_is_kept_beside_the_finished_one():
    done = tracked(*CELL, {"p_value": 0.04}, settings="aaaa", run_id="done")
    failed = tracked(*CELL, {}, status="FAILED", error="out of memory", settings="bbbb", run_id="failed")
    index = CellIndex.from_runs([done, failed])
    assert [cell.run_id for cell in index.finished] == ["done"]
    assert [cell.run_id for cell in index.unfinished] == ["failed"]


def test_a_claim_counts_each_settings_and_the_report_shows_both_side_by_side(tmp_path):
    runs = [tracked(*CELL, {"p_value": 0.004, "flag": 1.0}, settings="aaaa", params=_params(250), run_id="r250"),
            tracked(*CELL, {"p_value": 0.2, "flag": 0.0}, settings="bbbb", params=_params(5000), run_id="r5000")]
    index = CellIndex.from_runs(runs)
    claim = Claim("c", "Qwen is flagged on SLAKE.", "", (
        Evidence("release", Selection(*((name,) for name in CELL)), Condition.parse("p_value < 0.01"),
                 Quantifier.parse("all")),), "holds", "fails")
    result = evaluate_claim(claim, index)
    (item,) = result.items
    assert [check.cell.run_id for check in item.checks] == ["r250", "r5000"]
    assert result.status == "fails"  # the run with more permutations is not significant: it is not hidden
    markdown = to_markdown(report_blocks([result], index, [], ReportContext("e", "sqlite://", "rep", "now"), {}, []))
    cells = markdown[markdown.index("## Cells"):]
    rows = [line for line in cells.splitlines() if line.startswith("| `model=qwen")]
    assert len(rows) == 2
    assert "`aaaa`" in rows[0] and "detector.permutations=250" in rows[0] and "r250" in rows[0]
    assert "`bbbb`" in rows[1] and "detector.permutations=5000" in rows[1] and "r5000" in rows[1]
    assert "(detector.permutations=5000)" in markdown[:markdown.index("## Cells")]  # the evidence table says which
