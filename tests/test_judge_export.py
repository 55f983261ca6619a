"""Judge exports: folded plugin weights, ONNX graph and the sklearn pipeline agree; judge file I/O; CLI."""
from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from onnx import numpy_helper
from sklearn.linear_model import LogisticRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from test_judge_train import HD, HT, SMALL_GRID, planted_featureset
from trtllm_autojudge.judge.cli_train import main_export, main_train
from trtllm_autojudge.judge.export import FILE_NAMES, export_judge, plugin_fields, unsupported_reason, vllm_judge_config
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.judge.onnx_graph import build_onnx, check_onnx, run_onnx
from trtllm_autojudge.judge.train import split_by_group, train_judge
from trtllm_autojudge.trt.plugin.contract import check_plugin_fields


@pytest.fixture(scope="module", params=["DT", "DD-DT"])
def trained(request):
    fs, _ = planted_featureset(setup=request.param, noise=0.5)
    head, report = train_judge(fs, seed=1, c_grid=SMALL_GRID, progress=False)
    return fs, head, report


def test_folded_weights_onnx_and_sklearn_pipeline_agree(trained):
    fs, head, report = trained
    train, val = split_by_group(fs.prompt_index, 0.1, seed=1)
    X = fs.features.astype(np.float32)
    pipeline = make_pipeline(StandardScaler(), LogisticRegression(C=report.chosen_c, max_iter=1000))
    pipeline.fit(X[train], fs.labels[train])
    ref_logit, ref_prob = pipeline.decision_function(X), pipeline.predict_proba(X)[:, 1]

    fields = plugin_fields(head)
    folded_logit = X.astype(np.float64) @ fields["judge_weight"].astype(np.float64) + float(fields["judge_bias"][0])
    onnx_logit, onnx_prob = run_onnx(build_onnx(head), X)
    for logit in (folded_logit, onnx_logit, head.logits(X)):
        assert np.abs(logit - ref_logit).max() < 1e-5
    for prob in (1 / (1 + np.exp(-folded_logit)), onnx_prob):
        assert np.abs(prob - ref_prob).max() < 1e-5


def test_plugin_fields_name_the_setup(trained):
    _, head, _ = trained
    fields = plugin_fields(head)
    assert set(fields) == {"judge_weight", "judge_bias", "feature_blocks", "target_hidden", "draft_hidden", "threshold",
                           "min_run"}
    assert fields["judge_weight"].dtype == np.float32 and fields["judge_weight"].shape == (head.coef.shape[0],)
    assert fields["judge_bias"].dtype == np.float32 and fields["judge_bias"].shape == (1,)
    assert fields["feature_blocks"].dtype == np.int32 and fields["target_hidden"][0] == HT
    expected = {"DT": ([0], 0), "DD-DT": ([1, 0], HD)}[head.setup]
    assert (fields["feature_blocks"].tolist(), fields["draft_hidden"][0]) == expected
    assert fields["threshold"][0] == np.float32(head.threshold)


def test_setups_the_plugin_cannot_compute_are_refused():
    fs, _ = planted_featureset(setup="TT", prompts=10)
    head, _ = train_judge(fs, c_grid=SMALL_GRID, progress=False)
    with pytest.raises(ValueError, match="plugin computes the blocks .*train with a setup of those blocks"):
        plugin_fields(head)


def test_lookahead_judges_export_for_the_plugin_but_not_with_a_veto():
    setup = "DD-DT-DT1-DT2-DD1-LS"
    F = feature_dim(setup, HD, HT)
    rng = np.random.default_rng(0)
    head = JudgeHead(rng.normal(size=F), rng.normal(size=F), rng.uniform(0.5, 2, size=F), 0.2, setup, HD, HT)
    fields = plugin_fields(head)
    w, c = head.folded()
    assert fields["feature_blocks"].tolist() == [1, 0, 2, 3, 4, 5] and fields["draft_hidden"].tolist() == [HD]
    np.testing.assert_array_equal(fields["judge_weight"], w)
    check_plugin_fields({**fields, "max_path_len": np.array([5]), "output_mode": np.array([0])})
    vetoed = dataclasses.replace(head, meta={"veto": {"classes": ["digits"], "token_ids": [3, 4]}})
    with pytest.raises(ValueError, match="no token veto"):
        plugin_fields(vetoed)
    limited = dataclasses.replace(head, meta={"max_judged": 4})
    with pytest.raises(ValueError, match="limits a response to 4 judged acceptances .*calibrate without --max-judged"):
        plugin_fields(limited)
    assert fields["min_run"].tolist() == [1]
    held = dataclasses.replace(head, meta={"min_run": 4})
    assert plugin_fields(held)["min_run"].tolist() == [4]  # the plugin applies a minimum run
    assert "open at least 4 tokens" in unsupported_reason(held, "vllm")  # the research code's vLLM judge does not


def test_vllm_judge_config_keys_and_score(trained):
    fs, head, report = trained
    if head.setup != "DT":
        with pytest.raises(ValueError, match="vLLM JudgeConfig takes setup DT only"):
            vllm_judge_config(head)
        return
    cfg = json.loads(json.dumps(vllm_judge_config(head)))
    assert set(cfg) == {"weights", "mean", "scale", "bias", "threshold", "thresholds"}
    assert len(cfg["weights"]) == len(cfg["mean"]) == len(cfg["scale"]) == HT and len(cfg["bias"]) == 1
    assert cfg["threshold"] == head.threshold
    assert cfg["thresholds"] == [r["threshold"] for r in report.frontier]
    x = fs.features[:50].astype(np.float64)  # the research code's score: standardise, then the unfolded weights
    logit = ((x - cfg["mean"]) / cfg["scale"]) @ np.array(cfg["weights"]) + cfg["bias"][0]
    assert np.abs(logit - head.logits(fs.features[:50])).max() < 1e-5


def test_export_judge_writes_every_supported_format(trained, tmp_path):
    _, head, _ = trained
    written = export_judge(head, tmp_path / "out")
    expected = {"plugin", "onnx", "vllm"} if head.setup == "DT" else {"plugin", "onnx"}
    assert set(written) == expected
    assert all(p.is_file() and p.name == FILE_NAMES[f] for f, p in written.items())
    with np.load(written["plugin"]) as saved:
        for name, value in plugin_fields(head).items():
            assert np.array_equal(saved[name], value) and saved[name].dtype == value.dtype
    if head.setup != "DT":
        with pytest.raises(ValueError, match="cannot export format vllm"):
            export_judge(head, tmp_path / "out2", ["vllm"])


def test_onnx_check_catches_a_wrong_graph(trained):
    _, head, _ = trained
    model = build_onnx(head)
    assert check_onnx(model, head) < 1e-4
    weight = next(t for t in model.graph.initializer if t.name == "judge_weight")
    tampered = numpy_helper.to_array(weight).copy()
    tampered[0, 0] += 1e-2
    weight.CopyFrom(numpy_helper.from_array(tampered, "judge_weight"))
    with pytest.raises(RuntimeError, match="disagrees with NumPy"):
        check_onnx(model, head)


def test_judge_file_round_trip(trained, tmp_path):
    _, head, _ = trained
    head.save(tmp_path / "judge.safetensors")
    back = JudgeHead.load(tmp_path / "judge.safetensors", draft_hidden=HD, target_hidden=HT,
                          draft_model="tiny-draft", target_model="tiny-target")
    for name in ("coef", "mean", "scale"):
        assert np.array_equal(getattr(back, name), getattr(head, name))
    assert back.intercept == pytest.approx(head.intercept, rel=1e-7)
    assert (back.setup, back.draft_hidden, back.target_hidden, back.threshold) == \
           (head.setup, head.draft_hidden, head.target_hidden, head.threshold)
    assert back.meta == json.loads(json.dumps(head.meta))
    assert back.fingerprint() == head.fingerprint() and len(head.fingerprint()) == 16
    for change in ({"threshold": 0.25}, {"coef": head.coef + np.float32(1e-3)}, {"setup": head.setup, "intercept": 1.5}):
        assert dataclasses.replace(head, **change).fingerprint() != head.fingerprint()


def test_judge_for_other_models_refuses_to_load(trained, tmp_path):
    _, head, _ = trained
    head.save(tmp_path / "judge.safetensors")
    with pytest.raises(ValueError, match=f"target hidden size 4096 != judge's {HT}"):
        JudgeHead.load(tmp_path / "judge.safetensors", target_hidden=4096)
    with pytest.raises(ValueError, match="draft_model 'other-draft' != the 'tiny-draft' the judge was trained on"):
        JudgeHead.load(tmp_path / "judge.safetensors", draft_model="other-draft")


def test_cli_train_then_export(tmp_path, capsys):
    fs, _ = planted_featureset(setup="DD-DT", prompts=30)
    fs.save(tmp_path / "features.safetensors")
    judge = tmp_path / "judge.safetensors"
    rc = main_train(["--features", str(tmp_path / "features.safetensors"), "--setup", "DT", "--out", str(judge),
                     "--seed", "2", "--c-grid", "1e-3,1", "--max-important-accept", "0.02",
                     "--plot", str(tmp_path / "frontier.png")])
    assert rc == 0
    head = JudgeHead.load(judge)
    assert head.setup == "DT" and [r["C"] for r in head.meta["metrics"]["c_grid"]] == [1e-3, 1.0]
    assert head.meta["metrics"]["max_important_accept"] == 0.02
    assert (tmp_path / "frontier.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "validation ROC-AUC" in capsys.readouterr().out

    assert main_export(["--judge", str(judge), "--out-dir", str(tmp_path / "exp")]) == 0
    assert sorted(p.name for p in (tmp_path / "exp").iterdir()) == sorted(FILE_NAMES.values())

    fs.labels[:] = 1
    fs.save(tmp_path / "one_class.safetensors")
    rc = main_train(["--features", str(tmp_path / "one_class.safetensors"), "--out", str(tmp_path / "j2.safetensors")])
    assert rc == 2 and "needs both classes" in capsys.readouterr().err
    assert not (tmp_path / "j2.safetensors").exists()
