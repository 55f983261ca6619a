"""Judge training: feature-set file, split by prompt, C grid, frontier, bad input."""
from __future__ import annotations

import numpy as np
import pytest

from trtllm_autojudge.judge.dataset import FeatureSet
from trtllm_autojudge.judge.frontier import choose_threshold, sweep_thresholds
from trtllm_autojudge.judge.head import JudgeHead, feature_dim, parse_setup
from trtllm_autojudge.judge.train import split_by_group, train_judge

HD, HT = 6, 10  # tiny draft / target hidden sizes
SMALL_GRID = (1e-4, 1e-2, 1.0)


def planted_featureset(setup: str = "DD-DT", prompts: int = 60, rows_per_prompt: int = 20, seed: int = 0,
                       noise: float = 0.3) -> tuple[FeatureSet, np.ndarray]:
    """Features with uneven offsets and scales whose label is a planted linear rule (plus a little
    noise): important when ``w . x + b > 0``, about a quarter of the rows. Returns (set, w [F])."""
    rng = np.random.default_rng(seed)
    F = feature_dim(setup, HD, HT)
    M = prompts * rows_per_prompt
    offset, spread = rng.normal(0, 3, F), rng.uniform(0.2, 4.0, F)
    x = offset + spread * rng.standard_normal((M, F))
    w = rng.standard_normal(F) / spread
    score = (x - offset) @ w
    b = -np.quantile(score, 0.75)
    labels = (score + b + noise * score.std() * rng.standard_normal(M) > 0).astype(np.int8)
    fs = FeatureSet(x.astype(np.float16), labels, np.repeat(np.arange(prompts), rows_per_prompt),
                    np.tile(np.arange(rows_per_prompt), prompts) + 30, setup, HD, HT,
                    "tiny-draft", "tiny-target", "synthetic")
    return fs, w


def test_training_recovers_a_planted_linear_rule():
    fs, w_true = planted_featureset()
    head, report = train_judge(fs, progress=False)
    assert report.val_roc_auc > 0.95
    w, _ = head.folded()
    cosine = w @ w_true / np.linalg.norm(w) / np.linalg.norm(w_true)
    assert cosine > 0.9
    assert head.setup == "DD-DT" and head.draft_hidden == HD and head.target_hidden == HT
    assert head.meta["target_model"] == "tiny-target" and head.meta["task"] == "synthetic"
    metrics = head.meta["metrics"]
    assert metrics["val_roc_auc"] == report.val_roc_auc and metrics["chosen_c"] in [r["C"] for r in metrics["c_grid"]]
    assert len(metrics["c_grid"]) == 19  # the default grid: 14 half-decades 1e-7..3e-1, then 1, 3, 10, 50, 100
    assert max(r["val_roc_auc"] for r in metrics["c_grid"]) == report.val_roc_auc
    counts = metrics["label_counts"]
    assert sum(counts[s][c] for s in ("train", "val") for c in ("important", "unimportant")) == fs.num_rows
    assert counts["train"]["important"] + counts["val"]["important"] == fs.label_counts()["important"]


def test_split_is_by_prompt():
    fs, _ = planted_featureset(prompts=50)
    train, val = split_by_group(fs.prompt_index, 0.1, seed=3)
    assert not set(fs.prompt_index[train]) & set(fs.prompt_index[val])
    assert np.all(train ^ val)
    assert len(set(fs.prompt_index[val])) == 5
    again, _ = split_by_group(fs.prompt_index, 0.1, seed=3)
    other, _ = split_by_group(fs.prompt_index, 0.1, seed=4)
    assert np.array_equal(train, again) and not np.array_equal(train, other)
    _, report = train_judge(fs, seed=3, c_grid=SMALL_GRID, progress=False)
    assert report.prompts == {"train": 45, "val": 5}
    assert report.label_counts["val"]["important"] + report.label_counts["val"]["unimportant"] == val.sum()


def test_split_by_template_keeps_each_template_on_one_side(tmp_path):
    """Prompts of one template never straddle the split; the file round trip keeps the templates;
    a set without them is refused with what to do."""
    fs, _ = planted_featureset(prompts=50)
    fs.template_index = fs.prompt_index // 5  # 10 templates of 5 prompts each
    fs.save(tmp_path / "f.safetensors")
    fs = FeatureSet.load(tmp_path / "f.safetensors")
    assert np.array_equal(fs.template_index, fs.prompt_index // 5)
    _, report = train_judge(fs, seed=3, c_grid=SMALL_GRID, split_by="template", progress=False)
    assert report.split_by == "template" and report.prompts == {"train": 45, "val": 5}  # one template of 5 prompts
    train, val = split_by_group(fs.template_index, 0.1, seed=3, unit="template")
    assert not set(fs.template_index[train]) & set(fs.template_index[val])
    for missing in (None, np.where(fs.prompt_index == 0, -1, fs.template_index)):
        fs.template_index = missing
        with pytest.raises(ValueError, match="a split by template needs each row's template, and .* rows have none"):
            train_judge(fs, c_grid=SMALL_GRID, split_by="template", progress=False)


def test_one_prompt_cannot_be_split():
    with pytest.raises(ValueError, match="at least 2 prompts"):
        split_by_group(np.zeros(10, np.int32))


def test_one_class_labels_are_refused():
    fs, _ = planted_featureset(prompts=10)
    fs.labels[:] = 0
    with pytest.raises(ValueError, match="all 200 labels are unimportant: a judge needs both classes"):
        train_judge(fs, progress=False)


def test_nan_features_are_refused_or_dropped_explicitly():
    fs, _ = planted_featureset(prompts=20)
    fs.features[[3, 50, 51], 2] = np.nan
    fs.features[70, 0] = np.inf
    with pytest.raises(ValueError, match="4 of 400 feature rows hold NaN or inf .*drop-nonfinite"):
        train_judge(fs, c_grid=SMALL_GRID, progress=False)
    head, report = train_judge(fs, c_grid=SMALL_GRID, drop_nonfinite=True, progress=False)
    assert report.dropped_nonfinite_rows == 4
    assert head.meta["metrics"]["dropped_nonfinite_rows"] == 4


def test_feature_dimension_must_match_setup_and_hidden_sizes():
    fs, _ = planted_featureset(setup="DT", prompts=4)
    with pytest.raises(ValueError, match=r"features have 10 columns, but setup DD-DT .* needs 16"):
        FeatureSet(fs.features, fs.labels, fs.prompt_index, fs.position, "DD-DT", HD, HT, "d", "t", "x")
    with pytest.raises(ValueError, match=r"setup DD-DT needs blocks \['DD'\], but this feature set holds only DT"):
        train_judge(fs, setup="DD-DT", progress=False)


def test_empty_and_malformed_sets_are_refused():
    with pytest.raises(ValueError, match="empty"):
        FeatureSet(np.zeros((0, HT)), np.zeros(0), np.zeros(0, int), np.zeros(0, int), "DT", HD, HT, "d", "t", "x")
    with pytest.raises(ValueError, match="labels must be 0 .* or 1"):
        FeatureSet(np.zeros((2, HT)), [0, 2], [0, 1], [5, 6], "DT", HD, HT, "d", "t", "x")
    with pytest.raises(ValueError, match=r"prompt_index must be \[M\] = \[2\]"):
        FeatureSet(np.zeros((2, HT)), [0, 1], [0], [5, 6], "DT", HD, HT, "d", "t", "x")


def test_frontier_is_monotone_and_the_threshold_rule_holds():
    fs, _ = planted_featureset(noise=1.0)
    head, report = train_judge(fs, c_grid=SMALL_GRID, max_important_accept=0.02, progress=False)
    rows = report.frontier
    t = [r["threshold"] for r in rows]
    assert len(rows) > 50 and all(a < b for a, b in zip(t, t[1:]))
    for col in ("accept_rate", "important_accept_rate", "unimportant_accept_rate"):
        v = [r[col] for r in rows]
        assert all(a <= b for a, b in zip(v, v[1:])), col
    assert rows[0]["accept_rate"] == 0.0
    assert all(r["recall"] == pytest.approx(1 - r["important_accept_rate"]) for r in rows)
    chosen = next(r for r in rows if r["threshold"] == head.threshold)
    assert chosen["important_accept_rate"] <= 0.02
    assert all(r["important_accept_rate"] > 0.02 for r in rows if r["threshold"] > head.threshold)
    assert 0.0 < chosen["accept_rate"] < 1.0


def test_sweep_thresholds_counts_by_hand():
    probs = np.array([0.1, 0.2, 0.3, 0.4, 0.9])
    labels = np.array([0, 0, 1, 0, 1])
    rows = {r["threshold"]: r for r in sweep_thresholds(probs, labels, num_quantiles=5)}
    r = rows[0.4]  # accepts 0.1, 0.2, 0.3: two unimportant, one important
    assert r["accept_rate"] == 0.6 and r["important_accept_rate"] == 0.5
    assert r["unimportant_accept_rate"] == pytest.approx(2 / 3) and r["precision"] == 0.5
    assert r["important_share_of_accepted"] == pytest.approx(1 / 3)
    assert choose_threshold(list(rows.values()), 0.4)["threshold"] == 0.3
    assert choose_threshold(list(rows.values()), 0.5)["threshold"] == 0.9


def test_featureset_file_round_trip(tmp_path):
    fs, _ = planted_featureset(setup="DD-DT-TD-TT", prompts=3, rows_per_prompt=4)
    fs.save(tmp_path / "f.safetensors")
    back = FeatureSet.load(tmp_path / "f.safetensors")
    assert back.features.dtype == np.float16 and back.labels.dtype == np.int8
    assert back.prompt_index.dtype == np.int32 and back.position.dtype == np.int32
    for name in ("features", "labels", "prompt_index", "position"):
        assert np.array_equal(getattr(back, name), getattr(fs, name))
    assert back.metadata() == fs.metadata()
    assert back.metadata()["draft_model"] == "tiny-draft"


def test_select_setup_slices_blocks_in_the_requested_order():
    fs, _ = planted_featureset(setup="DD-DT-TD-TT", prompts=2, rows_per_prompt=3)
    widths = {"DD": HD, "DT": HT, "TD": HD, "TT": HT}
    starts = np.cumsum([0] + [widths[b] for b in parse_setup(fs.setup)])
    block = {b: fs.features[:, starts[i]:starts[i + 1]] for i, b in enumerate(parse_setup(fs.setup))}
    for setup in ("DT", "DD-DT", "DD", "TT-DD", "DD-DT-TD-TT"):
        sub = fs.select_setup(setup)
        assert sub.setup == setup
        assert np.array_equal(sub.features, np.concatenate([block[b] for b in parse_setup(setup)], axis=1))
        assert np.array_equal(sub.labels, fs.labels)


def test_loading_a_file_that_is_not_a_feature_set(tmp_path):
    head = JudgeHead(np.ones(HT), np.zeros(HT), np.ones(HT), 0.0, "DT", HD, HT)
    head.save(tmp_path / "judge.safetensors")
    with pytest.raises(ValueError, match="no 'autojudge_features' metadata"):
        FeatureSet.load(tmp_path / "judge.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="not a readable safetensors feature-set file"):
        FeatureSet.load(tmp_path / "junk.safetensors")


def test_loading_a_file_that_is_not_a_judge(tmp_path):
    planted_featureset(seed=0)[0].save(tmp_path / "features.safetensors")
    with pytest.raises(ValueError, match="no 'autojudge' metadata: it is not a judge file"):
        JudgeHead.load(tmp_path / "features.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="not a readable safetensors judge file"):
        JudgeHead.load(tmp_path / "junk.safetensors")
    with pytest.raises(FileNotFoundError, match="judge file .* does not exist"):
        JudgeHead.load(tmp_path / "missing.safetensors")


def test_refit_all_fits_every_row_at_the_chosen_c():
    """The saved head is the scaler + regression of every row at the C the validation split chose."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.preprocessing import StandardScaler

    fs, _ = planted_featureset(prompts=40)
    held, report = train_judge(fs, seed=3, c_grid=SMALL_GRID, progress=False)
    refit, again = train_judge(fs, seed=3, c_grid=SMALL_GRID, refit_all=True, progress=False)
    assert again.refit_all and again.chosen_c == report.chosen_c and again.val_roc_auc == report.val_roc_auc
    X = StandardScaler().fit(fs.features.astype(np.float32))
    lr = LogisticRegression(C=report.chosen_c, max_iter=1000).fit(X.transform(fs.features.astype(np.float32)), fs.labels)
    assert np.allclose(refit.coef, lr.coef_[0], atol=1e-4) and np.allclose(refit.mean, X.mean_, atol=1e-5)
    assert not np.allclose(refit.coef, held.coef, atol=1e-4)


def test_feature_sets_concatenate_with_their_prompts_apart():
    a, _ = planted_featureset(prompts=10)
    b, _ = planted_featureset(prompts=6)
    b.template_index = np.full(b.num_rows, 3, np.int32)
    both = FeatureSet.concat([a, b])
    assert both.num_rows == a.num_rows + b.num_rows
    assert set(both.prompt_index[: a.num_rows]).isdisjoint(both.prompt_index[a.num_rows:])
    assert both.template_index[: a.num_rows].tolist() == [-1] * a.num_rows and set(both.template_index[a.num_rows:]) == {3}
    b.task = "another"
    with pytest.raises(ValueError, match="feature sets differ in \\['task'\\]"):
        FeatureSet.concat([a, b])
