"""The bootstrap intervals over questions: a tokens-per-cycle ratio against lossless (paired), and a
judge's AUC over the mismatches of the questions."""
import numpy as np
import pytest

from sklearn.metrics import roc_auc_score

from trtllm_autojudge.evaluation.bootstrap import auc_interval, ratio_interval


def _runs(seed=0, q=60):
    rng = np.random.default_rng(seed)
    cycles = rng.integers(5, 60, size=q).astype(float)  # [Q] questions of very different lengths
    tokens = cycles * rng.uniform(8, 14, size=q)  # [Q]
    return tokens, cycles


def test_pairing_cancels_what_both_runs_share():
    """A point exactly 1.1x lossless on every question: the paired interval is [1.1, 1.1], however
    different the questions; an unpaired resampling would spread over the questions' own spread."""
    tokens, cycles = _runs()
    lo, hi = ratio_interval(tokens * 1.1, cycles, tokens, cycles)
    assert lo == pytest.approx(1.1) and hi == pytest.approx(1.1)
    assert ratio_interval(tokens, cycles, tokens, cycles) == pytest.approx((1.0, 1.0))


def test_interval_holds_the_estimate_and_narrows_with_more_questions():
    rng = np.random.default_rng(1)
    widths = []
    for q in (30, 480):
        tokens, cycles = _runs(seed=q, q=q)
        mine = tokens * rng.normal(1.04, 0.05, size=q)  # [Q] a noisy 4% gain
        lo, hi = ratio_interval(mine, cycles, tokens, cycles, seed=q)
        estimate = (mine.sum() / cycles.sum()) / (tokens.sum() / cycles.sum())
        assert lo < estimate < hi and lo < 1.04 < hi
        widths.append(hi - lo)
    assert widths[1] < widths[0] / 2  # 16x the questions: about a quarter of the width


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match="four equal-length, non-empty"):
        ratio_interval([1.0, 2.0], [1.0], [1.0, 2.0], [1.0, 2.0])
    with pytest.raises(ValueError, match="four equal-length, non-empty"):
        ratio_interval([], [], [], [])


def _mismatches(seed: int, q: int, shift: float):
    """``q`` questions of 0-6 mismatches each, about one in five harmful; a harmful one scores
    ``shift`` higher on average."""
    rng = np.random.default_rng(seed)
    labels = [rng.random(rng.integers(0, 7)) < 0.2 for _ in range(q)]  # [M_q] bool each
    return labels, [rng.normal(shift * y, 1.0) for y in labels]


def test_the_auc_is_sklearns_on_the_pooled_mismatches_and_its_interval_narrows_with_questions():
    widths = []
    for q in (40, 640):
        labels, scores = _mismatches(q, q, shift=1.5)
        auc, lo, hi = auc_interval(labels, scores, seed=q)
        assert auc == pytest.approx(roc_auc_score(np.concatenate(labels), np.concatenate(scores)))
        assert lo < auc < hi and 0.5 < lo and hi <= 1.0
        widths.append(hi - lo)
    assert widths[1] < widths[0] / 2
    perfect = [np.array([True, False]), np.array([False])], [np.array([2.0, -1.0]), np.array([0.0])]
    assert auc_interval(*perfect) == (1.0, 1.0, 1.0)


def test_an_auc_needs_both_classes_and_matching_arrays():
    with pytest.raises(ValueError, match="needs both classes: the 3 labels are all False"):
        auc_interval([np.zeros(2, bool), np.zeros(1, bool)], [np.zeros(2), np.zeros(1)])
    with pytest.raises(ValueError, match="of equal lengths"):
        auc_interval([np.array([True, False])], [np.zeros(3)])
