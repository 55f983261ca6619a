"""experiments/judge_model_probe.py and judge/probe.fit_model_probe: other model families than the linear judge."""
import json
import runpy
from pathlib import Path

import numpy as np
import pytest

from trtllm_autojudge.judge.dataset import FeatureSet
from trtllm_autojudge.judge.probe import fit_model_probe

MAIN = runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "judge_model_probe.py"))["main"]
H = 6  # target hidden size


def _xor_rows(seed: int, M: int = 1200) -> tuple[np.ndarray, np.ndarray]:  # [M, H], [M]
    """Harmful iff the first two features share a sign: no linear judge can rank that."""
    X = np.random.default_rng(seed).normal(size=(M, H)).astype(np.float32)
    return X, (X[:, 0] * X[:, 1] > 0).astype(np.int64)


def test_non_linear_families_rank_a_rule_the_linear_judge_cannot():
    X, y = _xor_rows(0)
    Xv, yv = _xor_rows(1, 400)
    fits = {f: fit_model_probe(f, X, y, Xv, yv, [0.01, 1.0]) for f in ("logistic", "mlp", "boosted-trees")}
    assert fits["logistic"]["val_roc_auc"] < 0.6
    assert fits["mlp"]["val_roc_auc"] > 0.85 and fits["boosted-trees"]["val_roc_auc"] > 0.85
    assert fits["mlp"]["harmless_accepted_at"]["0.05"] > fits["logistic"]["harmless_accepted_at"]["0.05"]
    assert {"C", "alpha", "max_depth"} == {k for r in fits.values() for k in r} - {"val_roc_auc", "harmless_accepted_at"}
    with pytest.raises(ValueError, match="unknown model family 'svm'"):
        fit_model_probe("svm", X, y, Xv, yv, [1.0])


def test_script_writes_every_split_and_seed(tmp_path, capsys):
    X, y = _xor_rows(2, 800)
    prompts = np.repeat(np.arange(80), 10)
    path = tmp_path / "f.safetensors"
    FeatureSet(features=X, labels=y.astype(np.int8), prompt_index=prompts, position=np.arange(800) % 10, setup="DT",
               draft_hidden=4, target_hidden=H, draft_model="d", target_model="t", task="t", dtype="float32",
               template_index=prompts // 8).save(path)
    out = tmp_path / "probe.json"
    assert MAIN(["--features", str(path), "--setups", "DT", "--families", "logistic,mlp", "--seeds", "3,4",
                 "--out", str(out)]) == 0
    result = json.loads(out.read_text())["setups"]["DT"]
    assert set(result) == {"prompt", "template"}
    for split in result.values():
        assert set(split["per_seed"]) == {"3", "4"} and set(split["mean"]) == {"logistic", "mlp"}
        assert split["mean"]["mlp"]["val_roc_auc"] > split["mean"]["logistic"]["val_roc_auc"] + 0.2
    assert "template" in capsys.readouterr().out
    with pytest.raises(SystemExit, match=r"unknown \['svm'\]"):
        MAIN(["--features", str(path), "--families", "svm"])


def test_train_fractions_draw_a_learning_curve_on_the_same_validation_groups(tmp_path):
    """Fits on nested shares of the training prompts, scored on the same held-out prompts: a noisy
    linear rule is ranked better from all the prompts than from a tenth of them."""
    rng = np.random.default_rng(5)
    X = rng.normal(size=(3000, H)).astype(np.float32)
    y = (X @ rng.normal(size=H) + 2.0 * rng.normal(size=3000) > 0).astype(np.int8)
    prompts = np.repeat(np.arange(300), 10)
    files = []
    for half in (slice(0, 1500), slice(1500, 3000)):  # two label sets, read together as `train` reads them
        files += ["--features", str(tmp_path / f"f{half.start}.safetensors")]
        FeatureSet(features=X[half], labels=y[half], prompt_index=prompts[half] % 150, position=np.arange(1500) % 10,
                   setup="DT", draft_hidden=4, target_hidden=H, draft_model="d", target_model="t", task="t",
                   dtype="float32").save(files[-1])
    out = tmp_path / "curve.json"
    assert MAIN([*files, "--setups", "DT", "--splits", "prompt", "--families", "logistic",
                 "--seeds", "1,2,3", "--cs", "1e-3,1e-2,1", "--train-fractions", "0.02,1", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    assert sum(result["labels"].values()) == 3000  # both files' rows
    mean = result["setups"]["DT"]["prompt"]["mean"]
    assert set(mean) == {"logistic", "logistic@0.02"}
    assert mean["logistic"]["val_roc_auc"] > mean["logistic@0.02"]["val_roc_auc"] + 0.02
    part = MAIN.__globals__["training_share"]
    train = prompts < 200
    half, whole = part(prompts, train, 0.5, 7), part(prompts, train, 1.0, 7)
    assert np.unique(prompts[half & train]).size == 100 and (whole & train).sum() == train.sum()
    assert not (part(prompts, train, 0.25, 7) & ~half).any()  # nested: a larger share keeps the smaller one's prompts
    with pytest.raises(SystemExit, match=r"--train-fractions 0,1: each share must lie in \(0, 1\]"):
        MAIN([*files[:2], "--train-fractions", "0,1"])
