"""The paired bootstrap interval of a tokens-per-cycle ratio against lossless."""
import numpy as np
import pytest

from trtllm_autojudge.evaluation.bootstrap import ratio_interval


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
