"""build_scripts/judge_curve.py: cross-validated scores never see their own prompt; the curve and the
left tail on synthetic feature sets whose labels are (or are not) readable from the features."""
import json
import runpy
from pathlib import Path

import numpy as np
import pytest

from trtllm_autojudge.judge.dataset import FeatureSet

CURVE = runpy.run_path(str(Path(__file__).resolve().parents[1] / "build_scripts" / "judge_curve.py"))


def synthetic(readable: bool, prompts=40, per_prompt=12, seed=0) -> FeatureSet:
    rng = np.random.default_rng(seed)
    M = prompts * per_prompt
    x = rng.normal(size=(M, 8 + 8)).astype(np.float32)  # DD (8) then DT (8)
    signal = x[:, 9] - 0.5 * x[:, 12] if readable else rng.normal(size=M)
    labels = (signal + 0.3 * rng.normal(size=M) > 0).astype(np.int8)
    return FeatureSet(x, labels, np.repeat(np.arange(prompts), per_prompt), np.arange(M), "DD-DT", 8, 8, "d", "t", "toy")


def test_scores_come_from_judges_that_never_saw_the_prompt(monkeypatch):
    fs = synthetic(True)
    prompts = np.unique(fs.prompt_index)
    folds = np.array_split(np.random.default_rng(0).permutation(prompts), 4)
    seen = []
    real_fit = CURVE["LogisticRegression"].fit

    def fit(self, X, y):
        seen.append(X.shape[0])
        return real_fit(self, X, y)

    monkeypatch.setattr(CURVE["LogisticRegression"], "fit", fit)
    scores, size = CURVE["cross_validated_scores"](fs, folds, 1.0, 1.0)
    assert seen == [fs.num_rows - np.isin(fs.prompt_index, f).sum() for f in folds]  # each judge: the other folds only
    assert size == round(np.mean(seen)) and scores.shape == (fs.num_rows,) and np.all((scores > 0) & (scores < 1))


def test_curve_and_tail_separate_readable_from_random_labels(tmp_path):
    aucs = {}
    for readable in (True, False):
        path, out = tmp_path / f"f{readable}.safetensors", tmp_path / f"c{readable}.json"
        synthetic(readable).save(path)
        assert CURVE["main"](["--features", str(path), "--setups", "DT,DD-DT", "--cs", "1", "--fractions", "0.25,1",
                              "--folds", "4", "--tail-c", "1", "--out", str(out)]) == 0
        result = json.loads(out.read_text())
        aucs[readable] = {(r["setup"], r["train_fraction"]): r["cv_roc_auc"] for r in result["curve"]}
        tail = result["tail"]["DT"]
        assert [r["important_accept"] for r in tail] == list(CURVE["TAIL_RATES"])
        assert all(a["unimportant_accept"] <= b["unimportant_accept"] for a, b in zip(tail, tail[1:]))  # monotone
        assert result["labels"] == 480 and result["prompts"] == 40 and "judge_curve.py" in result["command"]
    assert aucs[True][("DT", 1.0)] > 0.9 and aucs[True][("DD-DT", 1.0)] > 0.9
    assert abs(aucs[False][("DT", 1.0)] - 0.5) < 0.1


def test_bad_arguments_say_what_to_change(tmp_path):
    path = tmp_path / "f.safetensors"
    synthetic(True, prompts=3).save(path)
    with pytest.raises(SystemExit, match="--folds must lie in"):
        CURVE["main"](["--features", str(path), "--folds", "5"])
    with pytest.raises(SystemExit, match="--fractions must lie in"):
        CURVE["main"](["--features", str(path), "--folds", "3", "--fractions", "0,1"])
