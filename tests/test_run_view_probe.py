"""experiments/run_view_probe.py: the target's view over a mismatch's whole run equals plain
forwards over the swapped sequence and the draft's greedy continuation, and the probe ranks
setups on the held-out rows the rule asks about."""
import argparse
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch

from test_features import plain_hidden
from test_lookahead import plain_logits
from test_mining import KeyTokens, decode, tiny_prompts
from tiny_models import tiny_pair
from trtllm_autojudge.mining.features import lookahead_blocks
from trtllm_autojudge.mining.miner import LabelMiner, MiningConfig


@pytest.fixture(scope="module")
def script():
    return runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "run_view_probe.py"))


def log_softmax(logits):  # [V] float64
    return logits - np.logaddexp.reduce(logits)


def test_run_blocks_equal_plain_forwards(script):
    target, draft = tiny_pair(seed=3)
    miner = LabelMiner(target, draft, KeyTokens(window=10), decode, MiningConfig(max_new_tokens=16))
    records = [r for r in (miner.mine(p, record_id=pid) for pid, p, _ in tiny_prompts(3)) if r["labels"]]
    steps, m = 5, 3
    runs = []
    for rec in records:
        with torch.no_grad():
            got = script["record_blocks"](target, draft, rec, steps, m)
        positions = [int(lab[0]) for lab in rec["labels"]]
        ref = lookahead_blocks(target, draft, rec["final_ids"], positions, [int(lab[3]) for lab in rec["labels"]],
                               ["DT", "DT1", "DT2", "LS"])
        for block in ref:
            np.testing.assert_allclose(got[block], ref[block], atol=1e-5)
        for j, (pos, _important, t_tok, d_tok) in enumerate(rec["labels"]):
            prefix = rec["final_ids"][:pos]
            path = [d_tok]  # the mismatch, then the draft's greedy children
            for _ in range(steps):
                path.append(int(np.argmax(plain_logits(draft, prefix + path))))
            hidden = [plain_hidden(target, prefix + path[:k + 1]) for k in range(m)]
            logits = [plain_logits(target, prefix + path[:k + 1]) for k in range(steps)]
            exact = [int(np.argmax(logits[k])) == path[k + 1] for k in range(steps)]
            run = 1 + (exact.index(False) if False in exact else steps)
            assert got["run"][j] == run
            runs.append(run)
            np.testing.assert_allclose(got["DTR"][j], hidden[m - 1], atol=1e-4)
            np.testing.assert_allclose(got["DTM"][j], np.mean(hidden, axis=0), atol=1e-4)
            lp = [log_softmax(x) for x in logits[:m]]
            entropy = [-(np.exp(x) * x).sum() for x in lp]
            margin = [np.diff(np.sort(x)[-2:])[0] for x in lp]
            nxt = [max(lp[k][path[k + 1]], -30.0) for k in range(m)]
            np.testing.assert_allclose(got["HES"][j], np.concatenate([entropy, margin, nxt]), atol=1e-3)
            parent = log_softmax(plain_logits(target, prefix))
            np.testing.assert_allclose(got["PAR"][j], [parent[t_tok], max(parent[d_tok], -30.0),
                                                      -(np.exp(parent) * parent).sum()], atol=1e-3)
    assert len(runs) > 3 and len(set(runs)) > 1  # the check covered short runs and long ones


def synthetic(seed: int, n: int = 3000) -> dict:
    """Rows whose harm only DTR tells, among those with a run of 4 or more; the rest is noise."""
    g = np.random.default_rng(seed)
    dtr = g.normal(size=(n, 3))
    label = (dtr[:, 0] + 0.3 * g.normal(size=n) > 1.0).astype(np.int64)
    data = {b: g.normal(size=(n, 4)).astype(np.float32) for b in ("DT", "DT1", "DT2", "LS", "DTM", "HES", "PAR")}
    return data | {"DTR": dtr.astype(np.float32), "label": label, "run": g.integers(1, 9, size=n),
                   "template": np.arange(n) % 40, "prompt": np.arange(n)}


@pytest.mark.parametrize("split", ["prompt", "template"])
def test_probe_finds_the_block_that_tells_harm_on_the_asked_rows(script, capsys, split):
    data = synthetic(0)
    result = script["probe"](data, ["DT-DT1-DT2-LS", "DT-DT1-DT2-LS-DTR"], 4, [7, 8], [0.01, 1.0], 0.25, split)
    asked = data["run"] >= 4
    assert (result["labels"], result["asked"], result["asked_harmful"], result["split"]) == (
        3000, asked.sum(), data["label"][asked].sum(), split)
    base, with_dtr = (result["setups"][s]["mean"] for s in ("DT-DT1-DT2-LS", "DT-DT1-DT2-LS-DTR"))
    assert base["all"]["val_roc_auc"] < 0.65 < 0.9 < with_dtr["all"]["val_roc_auc"]
    assert with_dtr["run>=4"]["val_roc_auc"] > 0.9
    assert with_dtr["all"]["harmless_accepted_at"]["0.05"] > base["all"]["harmless_accepted_at"]["0.05"]
    assert set(result["paired"]) == {"DT-DT1-DT2-LS@run>=4 - DT-DT1-DT2-LS@all",
                                     "DT-DT1-DT2-LS-DTR@all - DT-DT1-DT2-LS@all",
                                     "DT-DT1-DT2-LS-DTR@run>=4 - DT-DT1-DT2-LS@run>=4",
                                     "DT-DT1-DT2-LS-DTR@run>=4 - DT-DT1-DT2-LS@all"}
    gain = result["paired"]["DT-DT1-DT2-LS-DTR@all - DT-DT1-DT2-LS@all"]["roc_auc"]
    per_seed = [with_dtr_s["all"]["val_roc_auc"] - base_s["all"]["val_roc_auc"] for with_dtr_s, base_s in
                zip(result["setups"]["DT-DT1-DT2-LS-DTR"]["per_seed"].values(),
                    result["setups"]["DT-DT1-DT2-LS"]["per_seed"].values())]
    assert gain["mean"] == pytest.approx(np.mean(per_seed)) and gain["low"] < gain["mean"] < gain["high"]
    assert gain["low"] > 0 and gain["wins"] == 2
    assert "DT-DT1-DT2-LS-DTR" in capsys.readouterr().out


def test_probe_refuses_an_unknown_split(script):
    with pytest.raises(ValueError, match="split must be one of"):
        script["probe"](synthetic(1, 200), ["DT"], 4, [7], [1.0], 0.25, "question")


@pytest.mark.parametrize("argv, message", [
    (["--min-run", "9", "--steps", "8"], "--min-run 9 must lie in"),
    (["--setups", "DT-XX"], "unknown blocks \\['XX'\\]"),
])
def test_bad_arguments_are_refused_before_any_model_loads(script, tmp_path, argv, message):
    with pytest.raises(SystemExit, match=message):
        script["main"](["--labels", str(tmp_path / "none.jsonl"), "--work", str(tmp_path / "w"), *argv])


def test_a_work_folder_made_under_another_setup_is_refused(script, tmp_path):
    args = argparse.Namespace(labels=[Path("a.jsonl.gz")], steps=8, min_run=8, chunk=50, target="tuned",
                              draft="embedded", dtype="float32", device="cpu", work=tmp_path / "w")
    made = script["check_work"](args)
    assert made["dtype"] == "float32" and (tmp_path / "w" / "setup.json").exists()
    assert script["check_work"](args) == made  # the same setup resumes
    args.steps = 12
    with pytest.raises(SystemExit, match=r"another setup \({'steps': \(8, 12\)}"):
        script["check_work"](args)
    with pytest.raises(SystemExit, match="holds no features"):
        script["load_work"](tmp_path / "w")
