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
