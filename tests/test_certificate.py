"""The answer-change certificate's statistics, record and checks (no models needed)."""
import pytest
from scipy.stats import beta

from trtllm_autojudge.data.question_set import set_record
from trtllm_autojudge.evaluation.certificate import (Certificate, interval, most_allowed, questions_needed, rule_fields,
                                                     upper_bound)


@pytest.mark.parametrize("count,n", [(0, 1), (0, 100), (1, 100), (7, 300), (0, 348), (5, 5), (12, 474)])
def test_bounds_equal_clopper_pearson_from_beta_quantiles(count, n):
    """The one-sided bound is the beta(count + 1, n - count) quantile at 95%; the two-sided interval
    the 2.5% / 97.5% quantiles of beta(count, n - count + 1) and beta(count + 1, n - count)."""
    expected_upper = 1.0 if count == n else beta.ppf(0.95, count + 1, n - count)
    assert upper_bound(count, n) == pytest.approx(expected_upper, abs=1e-9)
    lo, hi = interval(count, n)
    assert lo == pytest.approx(0.0 if count == 0 else beta.ppf(0.025, count, n - count + 1), abs=1e-9)
    assert hi == pytest.approx(1.0 if count == n else beta.ppf(0.975, count + 1, n - count), abs=1e-9)


def test_questions_needed_for_a_budget():
    """0 changes in 299 bound the share at 1%, in 298 not; one change needs 473."""
    assert upper_bound(0, 299) <= 0.01 < upper_bound(0, 298)
    assert questions_needed(0.01) == 299
    assert questions_needed(0.01, count=1) == 473 and upper_bound(1, 473) <= 0.01 < upper_bound(1, 472)
    assert questions_needed(0.05) == 59 and questions_needed(0.5) == 5
    for budget in (0.0, 1.0, -0.1):
        with pytest.raises(ValueError, match="no number of questions certifies"):
            questions_needed(budget)


def test_most_allowed_counts():
    assert most_allowed(298, 0.01) == -1  # too few questions even for none
    assert most_allowed(299, 0.01) == 0 and most_allowed(472, 0.01) == 0 and most_allowed(473, 0.01) == 1
    assert most_allowed(10, 0.999) == 9  # all 10 changed bounds the share at 1, above 0.999


def test_bad_counts_are_refused():
    for count, n in ((1, 0), (-1, 5), (6, 5)):
        with pytest.raises(ValueError, match="0 <= count <= n"):
            upper_bound(count, n)


def certificate(**changes) -> Certificate:
    fields = dict(threshold=0.01, max_judged=None, questions=348,
                  question_set=set_record(["a", "b", "c"], "python build_scripts/heldout_questions.py --seed 5", 5,
                                          file="calib.jsonl"),
                  question_ids=["a", "b", "c"], answers_changed=0, answer_change_bound=upper_bound(0, 348),
                  max_answer_change=0.01, gold_losses=0, gold_drop_bound=upper_bound(0, 348), max_gold_drop=0.01,
                  confidence=0.95, task="gsm8k-program", dtype="bfloat16", k=16, tree=None, max_new_tokens=320,
                  pair="t-d", veto=[])
    return Certificate(**{**fields, **changes})


RUN = dict(task="gsm8k-program", dtype="bfloat16", k=16, tree=None, max_new_tokens=320, pair="t-d", threshold=0.01,
           max_judged=None, veto=[], min_run=None, min_target_prob=None)


def test_certificate_round_trip_and_where_it_applies():
    c = certificate()
    assert Certificate.from_meta(c.as_meta()) == c and Certificate.from_meta(None) is None
    assert c.mismatches(**RUN) == []
    assert c.mismatches(**{**RUN, "pair": None}) == []  # no fingerprint to compare: the rest decides
    assert c.mismatches(**{**RUN, "dtype": "float32", "k": 8}) == ["dtype float32 (certified: bfloat16)",
                                                                  "k 8 (certified: 16)"]
    assert c.mismatches(**{**RUN, "threshold": 0.02, "max_judged": 2, "pair": "x-y", "veto": ["digits"]}) == [
        "threshold 0.02 (certified: 0.01)", "max_judged 2 (certified: None)", "veto ['digits'] (certified: [])",
        "pair x-y (certified: t-d)"]
    assert c.overlap(["b", "z", "c"]) == 2 and c.overlap([]) == 0
    line = c.summary()
    assert "answers changed <= 0.86%" in line and "0 changed and 0 gold losses in 348 calibration questions" in line
    assert "K = 16" in line and "heldout_questions.py --seed 5; ids sha256 " in line


def test_a_certificate_whose_question_digest_does_not_match_is_refused():
    """The record's digest is checked against the certificate's own ids: a file edited by hand, or a
    record copied from another set, is refused naming the field."""
    meta = certificate().as_meta()
    meta["question_ids"] = ["a", "b", "d"]
    with pytest.raises(ValueError, match=r"question_set.ids_sha256 \w+ does not match the question ids"):
        Certificate.from_meta(meta)
    meta = certificate().as_meta()
    meta["question_set"] = {"questions": "out/calib.jsonl", "limit": None}  # made before records: no digest
    with pytest.raises(ValueError, match="names no ids_sha256: it cannot be checked or regenerated"):
        Certificate.from_meta(meta)



def test_a_certificate_records_the_minimum_run():
    """A judge's minimum run is part of what is certified; certificates made before it existed read as none."""
    old = {k: v for k, v in certificate().as_meta().items() if k != "min_run"}
    assert Certificate.from_meta(old).min_run is None
    c = certificate(min_run=4)
    assert Certificate.from_meta(c.as_meta()) == c
    assert c.mismatches(**{**RUN, "min_run": 4}) == [] and c.mismatches(**RUN) == ["min_run None (certified: 4)"]
    assert "judged acceptances opening at least 4 tokens" in c.summary()


def test_a_certificate_records_the_target_confidence_gate():
    """So is the gate; certificates made before it read as none, and the summary says it."""
    old = {k: v for k, v in certificate().as_meta().items() if k != "min_target_prob"}
    assert Certificate.from_meta(old).min_target_prob is None
    c = certificate(min_target_prob=0.9)
    assert Certificate.from_meta(c.as_meta()) == c
    assert c.mismatches(**{**RUN, "min_target_prob": 0.9}) == []
    assert c.mismatches(**RUN) == ["min_target_prob None (certified: 0.9)"]
    assert "judged only where the target gave its token at least 0.9" in c.summary()
    assert rule_fields({"min_run": 8, "min_target_prob": 0.9}) == {"veto": [], "min_run": 8, "min_target_prob": 0.9}


def test_a_certificate_missing_fields_is_refused():
    meta = certificate().as_meta()
    del meta["pair"]
    with pytest.raises(ValueError, match=r"lacks \['pair'\]: calibrate the judge again"):
        Certificate.from_meta(meta)


@pytest.mark.parametrize("asset, setup", [("judge_gsm8k_program.safetensors", "DT-DT1-DT2-LS"),
                                          ("judge_gsm8k_program_lookahead.safetensors", None)])
def test_the_program_tasks_judges_ship_certified(asset, setup):
    """Both shipped program judges default to the threshold their certificate proves, within 1% at
    95% on 300+ questions of the task, for the embedded pair in bf16 at K = 16; the task's judge is
    target-only, so every engine route runs it."""
    from trtllm_autojudge.judge.head import JudgeHead
    from trtllm_autojudge.tasks.base import ASSETS
    head = JudgeHead.load(ASSETS / asset)
    c = Certificate.from_meta(head.meta.get("certificate"))
    assert c is not None and c.threshold == head.threshold
    assert c.questions >= 299 and c.answer_change_bound <= c.max_answer_change <= 0.01
    assert c.answer_change_bound == pytest.approx(upper_bound(c.answers_changed, c.questions))
    assert (c.task, c.dtype, c.k, c.tree, c.max_new_tokens) == ("gsm8k-program", "bfloat16", 16, None, 320)
    assert len(c.question_ids) == c.questions
    if setup is not None:
        assert head.setup == setup
