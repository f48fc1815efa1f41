"""Renderings: each format escapes what it must, and all three say the same thing."""

from __future__ import annotations

from medexp.report.cells import CellIndex
from medexp.report.claims import Claim, Evidence, Selection
from medexp.report.conditions import Condition
from medexp.report.document import Code, Heading, Link, Paragraph, Status, Table, to_html, to_markdown
from medexp.report.evaluate import evaluate_claim
from medexp.report.quantifiers import Quantifier
from medexp.report.render import ReportContext, latex_table, report_blocks
from tests.report.tracked_cells import tracked

TRICKY = "a_b *c* [d] | e <f> & 5% $x$ #1"


def test_markdown_escapes_text_but_not_code():
    blocks = [Heading(2, TRICKY, anchor="x"), Paragraph([TRICKY, " ", Code("p_value < 0.05")]),
              Table(["h|1"], [[[TRICKY]]])]
    markdown = to_markdown(blocks)
    assert r"a\_b \*c\* \[d\] \| e \<f\> & 5% $x$ \#1" in markdown
    assert "`p_value < 0.05`" in markdown and '<a id="x"></a>' in markdown
    assert "| h\\|1 |" in markdown


def test_html_escapes_and_marks_statuses(tmp_path):
    page = to_html([Paragraph([TRICKY, Status("no evidence", "no evidence"), Link("x", "#a&b")])], "t", tmp_path)
    assert "a_b *c* [d] | e &lt;f&gt; &amp; 5% $x$ #1" in page
    assert '<strong class="status no-evidence">no evidence</strong>' in page and 'href="#a&amp;b"' in page


def test_latex_table_escapes_and_cites_runs_and_missing_cells():
    run = tracked("qwen", "slake", "exch_rank", "none", {"p_value": 0.0005}, run_id="abcdef1234567890")
    claim = Claim("c", "Claim with 50% & $ and_under", "§4", (
        Evidence("rel", Selection(("qwen",), ("slake",), ("exch_rank",), ("none",)), Condition.parse("p_value < 0.01"),
                 Quantifier.parse("all")),
        Evidence("hash", Selection(("qwen",), ("slake",), ("exch_rank",), ("order_hash",)),
                 Condition.parse("p_value > 0.1"), Quantifier.parse("all")),
    ), "survives", "does not survive")
    index = CellIndex.from_runs([run])
    result = evaluate_claim(claim, index)
    latex = latex_table([result], ReportContext("medexp", "sqlite:///x", "r1", "now"))
    assert r"Claim with 50\% \& \$ and\_under & \textbf{no evidence}" in latex
    assert r"qwen/slake/exch\_rank/none (abcdef12)" in latex
    assert r"missing model=qwen/bench=slake/detector=exch\_rank/control=order\_hash" in latex
    blocks = report_blocks([result], index, [], ReportContext("medexp", "sqlite:///x", "r1", "now"), {}, ["cells.csv"])
    markdown = to_markdown(blocks)
    assert "Statuses: no evidence 1" in markdown and "`abcdef1234567890`" in markdown


def test_an_underpowered_claim_names_its_mde_and_effect_in_every_format(tmp_path):
    run = tracked("clean", "demo", "option_order", "none", {"p_value": 0.4, "flag": 0.0, "mde": 0.123},
                  run_id="feedbeef00000000")
    claim = Claim("c", "The clean model is clean.", "", (
        Evidence("clean", Selection(("clean",), ("demo",), ("option_order",), ("none",)),
                 Condition.parse("p_value >= 0.01"), Quantifier.parse("all")),), "clean control", "not clean",
        effect=0.05)
    index = CellIndex.from_runs([run])
    result = evaluate_claim(claim, index)
    context = ReportContext("medexp", "sqlite:///x", "r1", "now")
    assert r"\textbf{underpowered (MDE 0.123 > effect 0.05)}" in latex_table([result], context)
    blocks = report_blocks([result], index, [], context, {}, ["cells.csv"])
    markdown = to_markdown(blocks)
    assert r"evidence clean: underpowered (MDE 0.123 \> effect 0.05)" in markdown  # markdown escapes ">"
    assert r"| yes; underpowered (MDE 0.123 \> effect 0.05) |" in markdown
    assert '<strong class="status underpowered">' in to_html(blocks, "t", tmp_path)


def test_a_confounded_claim_names_its_shift_auc_in_every_format(tmp_path):
    run = tracked("leaky", "demo", "membership", "none",
                  {"p_value": 1e-4, "flag": 1.0, "shift_auc": 0.912, "shift_p_value": 0.002, "shift_confounded": 1.0},
                  run_id="c0ffee0000000000")
    claim = Claim("c", "The leaky model's canaries are detected.", "", (
        Evidence("detected", Selection(("leaky",), ("demo",), ("membership",), ("none",)),
                 Condition.parse("flag == 1"), Quantifier.parse("all")),), "detected", "missed")
    index = CellIndex.from_runs([run])
    result = evaluate_claim(claim, index)
    context = ReportContext("medexp", "sqlite:///x", "r1", "now")
    status = "confounded (inputs alone tell members from non-members: shift AUC 0.912)"
    assert rf"\textbf{{{status}}}" in latex_table([result], context)
    blocks = report_blocks([result], index, [], context, {}, ["cells.csv"])
    markdown = to_markdown(blocks)
    assert f"evidence detected: {status}" in markdown and f"| yes; {status} |" in markdown
    assert "failed its distribution-shift control" in markdown
    assert '<strong class="status confounded">' in to_html(blocks, "t", tmp_path)


def test_claims_not_run_are_listed_apart_and_gap_cells_show_their_flagged_and_unflagged_subsets(tmp_path):
    gap = {"p_value": 0.0169, "flag": 0.0, "mean_flagged": -6.5313, "mean_unflagged": -6.8001, "n_examples": 1061.0,
           "n_flagged": 247.0, "n_images": 96.0, "n_flagged_images": 19.0, "gap": 0.2688, "gap_ci_low": 0.0417,
           "gap_ci_high": 0.498, "gap_minus_baseline": 0.2407, "gap_minus_baseline_ci_low": 0.0024,
           "gap_minus_baseline_ci_high": 0.4899, "gap_minus_baseline_p_value": 0.0721, "mde": 0.8234,
           "mde_gap": 0.4085, "underpowered": 1.0}
    answers = {"p_value": 0.001, "flag": 1.0, "mean_flagged": 0.9, "mean_unflagged": 0.25, "n_examples": 40.0,
               "n_flagged": 10.0, "n_images": 40.0, "n_flagged_images": 10.0, "gap": 0.65, "gap_ci_low": 0.4,
               "gap_ci_high": 0.85, "mde": 1.26, "mde_gap": 0.55, "underpowered": 1.0}
    index = CellIndex.from_runs([
        tracked("qwen", "slake", "overlap_gap", "none", gap, params={"detector.score": "mean_logprob"}),
        tracked("served", "demo", "overlap_gap_answers", "none", answers),
    ])

    def one(claim_id, model, bench, detector):
        item = Evidence("e", Selection((model,), (bench,), (detector,), ("none",)), Condition.parse("p_value >= 0"),
                        Quantifier.parse("all"))
        return evaluate_claim(Claim(claim_id, f"Claim {claim_id}.", "", (item,), "holds", "fails"), index)

    results = [one("ran", "qwen", "slake", "overlap_gap"), one("never", "blip2", "slake", "overlap_gap")]
    context = ReportContext("medexp", "sqlite:///x", "r1", "now")
    markdown = to_markdown(report_blocks(results, index, [], context, {}, ["cells.csv"]))
    assert "Statuses: holds 1, not run 1" in markdown
    not_run = markdown[markdown.index("## Not run"):markdown.index("## Claims")]
    assert "- **never** (not run): Claim never. Cells: `model=blip2, bench=slake, detector=overlap_gap, " \
           "control=none`." in not_run
    assert "### never" not in markdown and "[never](#never)" not in markdown and "### ran: holds" in markdown
    assert r"\textbf{not run}" in latex_table(results, context)
    gaps = markdown[markdown.index("## Flagged and unflagged items"):]
    assert ("| `qwen` | slake | `overlap_gap` | none | mean\\_logprob | -6.531 (247, 19) | -6.8 (814, 77) | "
            "0.2688 \\[0.0417, 0.498\\] | 0.0169 | 0.2407 \\[0.0024, 0.4899\\], p 0.0721 | d 0.82 (~0.408); "
            "underpowered |") in gaps
    assert "| `served` | demo | `overlap_gap_answers` | none | accuracy | 0.9 (10, 10) | 0.25 (30, 30) |" in gaps


def test_cells_table_shows_each_answering_cell_judge_and_verdict_counts():
    verdicts = {"n_verdict.correct": 310.0, "n_verdict.wrong": 90.0, "n_verdict.no_answer": 45.0,
                "n_verdict.error": 6.0, "n_verdict.original.correct": 155.0}
    answering = tracked("served", "vqa_rad", "option_order", "none", {"p_value": 0.02, **verdicts})
    answering.tags["medexp.judge"] = "read 0123456789abcdef"
    index = CellIndex.from_runs([answering, tracked("qwen", "slake", "exch", "none", {"p_value": 0.5})])
    context = ReportContext("medexp", "sqlite:///x", "r1", "now")
    markdown = to_markdown(report_blocks([], index, [], context, {}, ["cells.csv"]))
    rows = {line.split(" | ")[0]: line for line in markdown.splitlines() if line.startswith("| `model=")}
    assert rows["| `model=served,bench=vqa_rad,detector=option_order,control=none`"].endswith(
        "| read: 310 / 90 / 45 / 6 |")
    assert rows["| `model=qwen,bench=slake,detector=exch,control=none`"].endswith("|  |")
    frame = index.frame().set_index("cell_key")
    served = frame.loc["model=served,bench=vqa_rad,detector=option_order,control=none"]
    assert served["judge"] == "read 0123456789abcdef"
    assert (served["n_correct"], served["n_wrong"], served["n_no_answer"], served["n_error"]) == (310, 90, 45, 6)
