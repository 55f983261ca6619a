"""The live oracle (evaluation/live_oracle.py): a perfect judge under a minimum run, decided along
its own decoding by continuing the target from each mismatch it is asked about."""
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch

from test_speculative import MAX_NEW, prompts
from tiny_models import tiny_pair
from trtllm_autojudge.decoding.modes import VerifyContext
from trtllm_autojudge.decoding.speculative import speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.evaluation.live_oracle import LiveOracleRule


@pytest.fixture(scope="module")
def script() -> dict:
    """experiments/live_oracle.py's names (the folder is no package)."""
    return runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "live_oracle.py"),
                          run_name="live_oracle")


def chain_context(tree: DraftTree) -> VerifyContext:
    """A chain of 5 whose target wants 1, 2, 3, 4, 5, 6 after the root and nodes 1-5, drafted as
    1, 7, 3, 8, 5: node 2 and node 4 mismatch, and each opens a run of 2 (itself and one match)."""
    V = 10
    logits = torch.full((6, V), -5.0)  # [N+1, V]
    logits[torch.arange(6), torch.arange(1, 7)] = 5.0
    return VerifyContext(prefix=[9, 9, 0], tree=tree, draft_tokens=np.array([[1, 7, 3, 8, 5]]),
                         parents=np.asarray(tree.parents, np.int32)[None], target_logits=logits,
                         target_hidden=torch.zeros(6, 4), draft_hidden=None)


def test_it_asks_in_the_walks_order_and_stops_at_the_first_harm_or_short_run():
    asked = []
    keep_all = LiveOracleRule(lambda p: asked.append(p) or True, min_run=2)
    ctx = chain_context(DraftTree.chain(5))
    assert list(np.flatnonzero(keep_all(ctx)[0])) == [2, 4]
    assert asked == [[9, 9, 0, 1, 7], [9, 9, 0, 1, 7, 3, 8]] and keep_all.asked == 2
    assert keep_all.verdicts == [{"node": 2, "run": 2, "keeps": True}, {"node": 4, "run": 2, "keeps": True}]
    first_harms = LiveOracleRule(lambda p: False, min_run=2, score=lambda c, n: 10.0 * n if n < 4 else np.inf)
    assert not first_harms(ctx).any() and first_harms.asked == 1  # the walk stops there: node 4 is never asked
    assert first_harms.verdicts == [{"node": 2, "run": 2, "keeps": False, "score": 20.0}]
    scored = LiveOracleRule(lambda p: True, min_run=2, score=lambda c, n: 10.0 * n if n < 4 else np.inf)
    scored(ctx)
    assert scored.verdicts == [{"node": 2, "run": 2, "keeps": True, "score": 20.0}, {"node": 4, "run": 2, "keeps": True, "score": None}]
    too_short = LiveOracleRule(lambda p: True, min_run=3)
    assert not too_short(ctx).any() and too_short.asked == 0
    with pytest.raises(ValueError, match="chains only"):
        keep_all(chain_context(DraftTree.static([2, 1, 1])))
    with pytest.raises(ValueError, match="give 1 \\(any\\) or more"):
        LiveOracleRule(lambda p: True, min_run=0)


def test_decoding_with_it_keeps_exactly_the_swaps_it_was_told_keep_the_answer():
    """Told that a swap keeps the answer when its draft token is even, decoding keeps only even
    draft tokens where it relaxed; told none does, it decodes what lossless decodes."""
    target, draft = tiny_pair(seed=0)
    tree, judged = DraftTree.chain(6), 0
    for prompt in prompts(6):
        lossless = speculative_generate(target, draft, prompt, tree=tree, max_new_tokens=MAX_NEW).tokens
        never = LiveOracleRule(lambda p: False)
        assert speculative_generate(target, draft, prompt, tree=tree, rule=never, max_new_tokens=MAX_NEW).tokens == lossless
        even = LiveOracleRule(lambda p: p[-1] % 2 == 0)
        res = speculative_generate(target, draft, prompt, tree=tree, rule=even, max_new_tokens=MAX_NEW)
        assert all(d % 2 == 0 and d != t for _, d, t in res.judged_tokens)
        assert all(res.tokens[i] == d for i, d, _ in res.judged_tokens)
        judged += len(res.judged_tokens)
        assert never.asked >= (1 if lossless != res.tokens else 0)
    assert judged > 0  # the tiny pair mismatches: the assertions above were exercised


def test_the_script_summarizes_complete_questions_against_lossless(script):
    rec = lambda spec, qid, tokens, forwards, changed=False, asked=0: {  # noqa: E731
        "spec": spec, "qid": qid, "new_tokens": tokens, "target_forwards": forwards, "changed": changed,
        "judged_accepts": asked, "asked": asked, "seconds": 1.0}
    records = [rec("lossless", "a", 100, 10), rec("oracle-minrun4", "a", 100, 8, asked=2),
               rec("lossless", "b", 50, 5), rec("oracle-minrun4", "b", 60, 5, changed=True, asked=1),
               rec("lossless", "c", 70, 7)]  # c has no oracle run yet: left out
    folder = [{**rec("lossless", q, 10, 1), "answer": "1"} for q in "abc"] + [
        {**rec("judge@1", "a", 10, 1), "answer": "1"}, {**rec("judge@1", "b", 30, 1), "answer": "2"}]
    out = script["summarize"](records, [4], {"f:judge@1": folder}, lambda x, y: x == y)
    point, other = out["points"]["oracle, minimum run 4"], out["points"]["f:judge@1"]
    assert out["questions"] == 2 and out["lossless_tokens_per_forward"] == pytest.approx(10.0)
    assert point["vs_lossless"] == pytest.approx((160 / 13) / 10.0)
    assert point["vs_lossless_95"][0] <= point["vs_lossless"] <= point["vs_lossless_95"][1]
    assert point["changed"] == 1 and point["continuations"] == 3
    assert 0 < point["changed_95"][0] < 0.5 < point["changed_95"][1]
    assert other["vs_lossless"] == pytest.approx(2.0) and other["changed"] == 1  # the same two questions
    with pytest.raises(SystemExit, match="1 of the questions have no lossless or judge@1 run"):
        script["summarize"](records, [4], {"f:judge@1": folder[1:]}, lambda x, y: x == y)
    with pytest.raises(SystemExit, match="no question has all its records"):
        script["summarize"](records[-1:], [4])
    assert "judge_auc" not in point and "harm_by_run" not in point  # no verdict was scored or carries its run


def test_the_script_reads_the_judges_auc_up_to_a_k16_window_and_past_it(script):
    v = lambda node, keeps, score: {"node": node, "keeps": keeps, "score": score}  # noqa: E731
    runs = [{"verdicts": [v(3, True, -2.0), v(9, False, 1.0), v(20, True, 0.5)]},
            {"verdicts": [v(5, True, -1.0), v(30, False, 1.0), v(40, True, 2.0), v(41, True, None)]},
            {"verdicts": []}]
    auc = script["judge_auc"](runs)
    shallow = auc["nodes 1-16"]
    assert {k: shallow[k] for k in ("asked", "harmful", "auc", "auc_95")} == {"asked": 3, "harmful": 1, "auc": 1.0,
                                                                              "auc_95": [1.0, 1.0]}
    # logit(0.02) = -3.9, logit(0.3) = -0.85: only the harmless -2.0 and -1.0 fall below the second cut
    assert shallow["accepted_at"]["0.02"] == [0, 0] and shallow["accepted_at"]["0.3"] == [2, 0]
    assert auc["all"]["accepted_at"]["0.3"] == [2, 0] and len(auc["all"]["accepted_at"]) == len(script["CUTS"])
    deep = auc["nodes 17 and deeper"]
    assert (deep["asked"], deep["harmful"], deep["auc"]) == (3, 1, 0.5)  # 1.0 between 0.5 and 2.0; None left out
    assert auc["all"]["asked"] == 6 and auc["all"]["auc"] == pytest.approx(6 / 8)  # each harmful 1.0 above 3 of the 4 harmless
    assert script["judge_auc"]([{"verdicts": [v(3, True, 0.0)]}])["all"]["auc"] is None  # one class: no AUC


def test_the_cut_frontier_gives_each_familys_best_cut_per_harmful_count(script):
    v = lambda run, keeps, score: {"node": 3, "run": run, "keeps": keeps, "score": score}  # noqa: E731
    runs = [{"verdicts": [v(40, True, -1.0), v(4, False, -2.0), v(4, True, -3.0)]},
            {"verdicts": [v(30, False, 0.0), v(10, True, 0.5), {"node": 9, "run": 50, "keeps": True, "score": None}]}]
    frontier = script["cut_frontier"](runs, harmful_max=2, long_runs=(8, 31))
    assert frontier["verdicts"] == 5 and frontier["harmless_tokens"] == 54  # the unscored one is left out
    # by logit: the harmless 4 (-3.0), then the harmful 4 (-2.0) before the harmless 40 (-1.0)
    assert frontier["families"]["flat"] == [4, 44, 54]
    assert frontier["families"]["flat, run >= 8"] == [40, 50, 50]  # the runs of 4 never accepted
    assert frontier["families"]["flat, run >= 31"] == [40, 40, 40]  # nor the harmful 30
    # by log sigmoid(score) - log(run): 40 (-5.00), 4 (-4.44), the harmful 30 (-4.09), 4 (-3.51), 10 (-2.78)
    assert frontier["families"]["per token"] == [44, 44, 54]
    tied = [{"verdicts": [v(5, True, -1.0), v(5, False, -1.0)]}]  # no cut parts equal keys
    assert script["cut_frontier"](tied, harmful_max=1)["families"]["flat"] == [0, 5]
    assert script["cut_frontier"]([{"verdicts": [{"node": 3, "keeps": True, "score": -1.0}]}]) is None  # no runs


def test_harm_by_run_counts_every_verdict_that_carries_its_run_scored_or_not(script):
    v = lambda run, keeps: {"node": 3, "run": run, "keeps": keeps}  # noqa: E731
    runs = [{"verdicts": [v(4, False), v(7, True), v(8, True)]}, {"verdicts": [v(20, False), v(64, True), {"node": 2, "keeps": True}]}]
    assert script["harm_by_run"](runs, edges=(4, 8, 32)) == {
        "4-7": {"asked": 2, "harmful": 1, "harmless_tokens": 7},
        "8-31": {"asked": 2, "harmful": 1, "harmless_tokens": 8},
        "32 and more": {"asked": 1, "harmful": 0, "harmless_tokens": 64}}
    assert script["harm_by_run"]([{"verdicts": [{"node": 2, "keeps": True}]}]) is None  # no runs kept
