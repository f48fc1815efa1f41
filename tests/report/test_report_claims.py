"""Claim files: the shipped ones load; a bad file fails with a message naming the file and the problem."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from medexp.config import conf_dir
from medexp.report.claims import ClaimError, claim_ids, load_claims

# Table 9 of the controlled audit (Appendix E) and the status it gives each claim; the ninth row
# is the VQA-RAD clean control of the abstract and section 4.1.
TABLE_9_STATUS = {
    "slake_image_overlap": "survives",
    "image_threshold_robust": "survives",
    "image_pairs_adjudicated": "qualified",
    "omnimedvqa_exchangeability": "survives",
    "slake_qwen_exchangeability": "survives",
    "pathvqa_release_order": "reattributed",
    "cohort_detectors_collapse": "collapses",
    "calibration_confound": "collapses",
    "vqa_rad_clean": "clean control",
}

GOOD = """\
id: {id}
sentence: A user claim.
evidence:
  - name: release
    select: {{model: [m1, m2], bench: b, detector: exch_rank, control: none}}
    require: p_value < 0.05
statuses: {{holds: survives, fails: collapses}}
"""


def _write_claim(folder: Path, name: str, text: str) -> Path:
    (folder / "claims").mkdir(parents=True, exist_ok=True)
    (folder / "claims" / f"{name}.yaml").write_text(textwrap.dedent(text))
    return folder


def test_every_shipped_claim_loads_and_table_9_carries_the_papers_status_words():
    shipped = sorted(path.stem for path in (conf_dir() / "claims").glob("*.yaml"))
    claims = {claim.id: claim for claim in load_claims()}
    assert sorted(claims) == shipped
    assert {name: claims[name].holds for name in TABLE_9_STATUS} == TABLE_9_STATUS
    assert len([name for name in shipped if name.startswith("demo_")]) >= 4
    # the adjudication claim says what rests on a person's review
    assert claims["image_pairs_adjudicated"].manual_review
    assert all(claim.evidence and claim.holds != claim.fails for claim in claims.values())


def test_a_users_folder_adds_a_claim(tmp_path):
    user = _write_claim(tmp_path, "my_claim", GOOD.format(id="my_claim"))
    assert "my_claim" in claim_ids([user])
    assert "my_claim" not in claim_ids()
    (claim,) = load_claims(["my_claim"], search_path=[user])
    assert claim.id == "my_claim" and claim.holds == "survives"
    (evidence,) = claim.evidence
    assert evidence.selection.model == ("m1", "m2") and evidence.selection.bench == ("b",)
    assert str(evidence.quantifier) == "all" and evidence.expect is None and evidence.condition.names == {"p_value"}


def test_an_unknown_claim_id_lists_the_available_ones():
    with pytest.raises(ClaimError, match="no claim file for \\['nope'\\]; available claims: .*vqa_rad_clean"):
        load_claims(["nope"])


BAD_FILES = {
    "unknown_key": (GOOD.format(id="unknown_key") + "evidnce: []\n", "Key 'evidnce' not in 'ClaimConfig'"),
    "unknown_item_key": (GOOD.format(id="unknown_item_key").replace("require:", "requires:"), "Key 'requires'"),
    "bad_quantifier": (GOOD.format(id="bad_quantifier").replace("    require", "    quantifier: most\n    require"),
                       "evidence 'release': quantifier 'most' is not one of all, any, sign_test, 'at_least K'"),
    "wrong_type": ("id: wrong_type\nsentence: s\nevidence: just text\nstatuses: {holds: a, fails: b}\n", "evidence"),
    "unsafe": (GOOD.format(id="unsafe").replace("p_value < 0.05", "__import__('os').getcwd() == 1"),
               "evidence 'release'.*not allowed"),
    "not_truth": (GOOD.format(id="not_truth").replace("p_value < 0.05", "flag"), "not a truth value"),
    "mismatch": (GOOD.format(id="another_name"), "id 'another_name' must equal the file name 'mismatch'"),
    "bad_select": (GOOD.format(id="bad_select").replace("bench: b", "bench: {a: 1}"),
                   "select.bench: expected a config name"),
    "star_in_list": (GOOD.format(id="star_in_list").replace("[m1, m2]", "[m1, '*']"), "'\\*' stands alone"),
    "no_require": (GOOD.format(id="no_require").replace("    require: p_value < 0.05\n", ""), "missing 'require'"),
    "half_statuses": (GOOD.format(id="half_statuses").replace(", fails: collapses", ""),
                      "statuses.fails must be a status word"),
    "reserved_status": (GOOD.format(id="reserved_status").replace("fails: collapses", "fails: no evidence"),
                        "reserves"),
    "reserved_underpowered": (
        GOOD.format(id="reserved_underpowered").replace("fails: collapses", "fails: underpowered"), "reserves"),
    "reserved_confounded": (
        GOOD.format(id="reserved_confounded").replace("fails: collapses", "fails: confounded"), "reserves"),
    "negative_effect": (GOOD.format(id="negative_effect") + "effect: -0.05\n", "effect must be a positive number"),
    "text_effect": (GOOD.format(id="text_effect") + "effect: large\n",
                    "Value .large. of type .str. could not be converted"),
    "count_without_expect": (GOOD.format(id="count_without_expect").replace("    require", "    quantifier: at_least 9\n    require"),
                             "evidence 'release': quantifier 'at_least 9' counts cells: state how many"),
    "count_above_expect": (GOOD.format(id="count_above_expect").replace(
        "    require", "    quantifier: at_least 11\n    expect: 10\n    require"), "K must be between 1 and 10"),
    "bad_share": (GOOD.format(id="bad_share").replace("    require", "    quantifier: fraction_at_least 90%\n    require"),
                  "'90%' is not a number"),
    "expect_zero": (GOOD.format(id="expect_zero").replace("    require", "    expect: 0\n    require"),
                    "expect must be a number of cells \\(1 or more\\), got 0"),
    "expect_text": (GOOD.format(id="expect_text").replace("    require", "    expect: ten\n    require"),
                    "Value .ten. of type .str. could not be converted to Integer"),
}


REPLICATES = """\
id: replicates
sentence: exch flags at least 9 of 10 leaky replicates.
evidence:
  - name: leaky
    select: {model: "demo_leaky_e30_s*", bench: demo, detector: exch, control: [none, "order_*"]}
    require: p_bonferroni < 0.01
    quantifier: at_least 9
    expect: 10
  - name: share
    select: {model: "demo_clean_s1?"}
    require: p_bonferroni < 0.01
    quantifier: fraction_at_most 0.1
    expect: 10
statuses: {holds: confirmed, fails: refuted}
"""


def test_a_replicate_claim_loads_its_patterns_quantifiers_and_expected_counts(tmp_path):
    user = _write_claim(tmp_path, "replicates", REPLICATES)
    (claim,) = load_claims(["replicates"], search_path=[user])
    leaky, share = claim.evidence
    assert leaky.selection.model == ("demo_leaky_e30_s*",) and leaky.selection.control == ("none", "order_*")
    assert (str(leaky.quantifier), leaky.expect) == ("at_least 9", 10)
    assert (str(share.quantifier), share.expect, share.selection.bench) == ("fraction_at_most 0.1", 10, None)


@pytest.mark.parametrize("name", list(BAD_FILES))
def test_a_bad_claim_file_fails_with_the_file_and_problem_named(tmp_path, name):
    text, message = BAD_FILES[name]
    user = _write_claim(tmp_path, name, text)
    with pytest.raises(ClaimError, match=message) as caught:
        load_claims([name], search_path=[user])
    assert f"claims/{name}.yaml" in str(caught.value)


def test_evidence_names_must_be_unique(tmp_path):
    doubled = GOOD.format(id="twins").replace("evidence:\n", "evidence:\n  - {name: release, require: flag == 1}\n")
    user = _write_claim(tmp_path, "twins", doubled)
    with pytest.raises(ClaimError, match="evidence names must be unique; repeated: \\['release'\\]"):
        load_claims(["twins"], search_path=[user])


def test_a_claim_may_name_the_effect_it_is_about(tmp_path):
    user = _write_claim(tmp_path, "sized", GOOD.format(id="sized") + "effect: 0.05\n")
    (claim,) = load_claims(["sized"], search_path=[user])
    assert claim.effect == 0.05
    assert load_claims(["vqa_rad_clean"])[0].effect is None
