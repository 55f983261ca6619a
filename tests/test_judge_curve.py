"""experiments/judge_curve.py: cross-validated scores never see their own prompt; the curve and the
left tail on synthetic feature sets whose labels are (or are not) readable from the features."""
import json
import runpy
from pathlib import Path

import numpy as np
import pytest

from trtllm_autojudge.judge.dataset import FeatureSet

CURVE = runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "judge_curve.py"))


def synthetic(readable: bool, prompts=40, per_prompt=12, seed=0) -> FeatureSet:
    rng = np.random.default_rng(seed)
    M = prompts * per_prompt
    x = rng.normal(size=(M, 8 + 8)).astype(np.float32)  # DD (8) then DT (8)
    signal = x[:, 9] - 0.5 * x[:, 12] if readable else rng.normal(size=M)
    labels = (signal + 0.3 * rng.normal(size=M) > 0).astype(np.int8)
    return FeatureSet(x, labels, np.repeat(np.arange(prompts), per_prompt), np.arange(M), "DD-DT", 8, 8, "d", "t", "toy")


def training_rows_of_each_fit(monkeypatch) -> list[int]:
    """The number of training rows of every logistic regression fitted from now on (filled as they run)."""
    seen = []
    real_fit = CURVE["LogisticRegression"].fit

    def fit(self, X, y):
        seen.append(X.shape[0])
        return real_fit(self, X, y)

    monkeypatch.setattr(CURVE["LogisticRegression"], "fit", fit)
    return seen


def test_scores_come_from_judges_that_never_saw_the_prompt(monkeypatch):
    fs = synthetic(True)
    prompts = np.unique(fs.prompt_index)
    folds = np.array_split(np.random.default_rng(0).permutation(prompts), 4)
    seen = training_rows_of_each_fit(monkeypatch)
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


def test_extra_rows_train_every_fold_but_never_for_their_own_questions(monkeypatch):
    fs = synthetic(True, prompts=12, per_prompt=6)
    ex = synthetic(True, prompts=16, per_prompt=3, seed=1)  # questions q0..q15: q12..q15 are not in the main set
    main_question = np.array([f"q{i}" for i in range(12)])
    extra = CURVE["Extra"](ex.features, ex.labels, np.array([f"q{i}" for i in ex.prompt_index]), main_question)
    folds = np.array_split(np.arange(12), 3)
    seen = training_rows_of_each_fit(monkeypatch)
    scores, size = CURVE["cross_validated_scores"](fs, folds, 1.0, 1.0, extra)
    assert seen == [fs.num_rows - 6 * len(f) + ex.num_rows - 3 * len(f) for f in folds]
    assert scores.shape == (fs.num_rows,) and size == round(np.mean(seen))


def test_extra_features_are_reported_beside_the_main_set(tmp_path, monkeypatch):
    main, extra = tmp_path / "main.safetensors", tmp_path / "extra.safetensors"
    synthetic(True, prompts=12).save(main)
    synthetic(True, prompts=8, seed=1).save(extra)
    ids = {"main.jsonl": [f"q{i}" for i in range(12)], "extra.jsonl": [f"q{i}" for i in range(4, 12)]}
    monkeypatch.setitem(CURVE["main"].__globals__, "record_ids", lambda path: np.array(ids[Path(path).name]))
    out = tmp_path / "c.json"
    base = ["--features", str(main), "--setups", "DT", "--cs", "1", "--fractions", "1", "--folds", "3", "--tail-c", "1"]
    assert CURVE["main"](base + ["--labels", "main.jsonl", "--extra-features", str(extra), "--extra-labels", "extra.jsonl",
                                 "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert [r["setup"] for r in result["curve"]] == ["DT", "DT+extra"] and set(result["tail"]) == {"DT", "DT+extra"}
    assert result["curve"][1]["train_labels"] > result["curve"][0]["train_labels"]
    with pytest.raises(SystemExit, match="--extra-features needs --extra-labels"):
        CURVE["main"](base + ["--extra-features", str(extra), "--extra-labels", "extra.jsonl"])
    ids["main.jsonl"] = ids["main.jsonl"][:5]
    with pytest.raises(SystemExit, match="--labels holds 5 records"):
        CURVE["main"](base + ["--labels", "main.jsonl", "--extra-features", str(extra), "--extra-labels", "extra.jsonl"])
