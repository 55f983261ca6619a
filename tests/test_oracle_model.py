"""evaluation/oracle_model.py and experiments/oracle_model.py: the oracle's gain on a chain, modelled."""
import json
import runpy
from pathlib import Path

import numpy as np
import pytest

from trtllm_autojudge.evaluation.oracle_model import (chain_tokens, constant_alphas, oracle_ratio, share_needed,
                                                      with_harmless)

MAIN = runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "oracle_model.py"))["main"]


def _simulated_tokens(alphas: np.ndarray, share: float, cycles: int, seed: int) -> float:
    """Reference: chain cycles drawn one by one. Depth d matches with probability alphas[d]; a
    mismatch is harmless (accepted, the walk goes on) with probability ``share``; the walk stops at
    the first harmful mismatch. A cycle emits its accepted drafts and the target's token."""
    rng = np.random.default_rng(seed)
    match = rng.random((cycles, len(alphas))) < alphas  # [C, D]
    harmless = rng.random((cycles, len(alphas))) < share  # [C, D]
    ok = match | harmless  # [C, D]
    accepted = np.where(ok.all(1), len(alphas), np.argmin(ok, axis=1))  # [C]: drafts before the first stop
    return float(accepted.mean() + 1)


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_model_equals_simulated_chains(seed):
    rng = np.random.default_rng(seed)
    alphas, share = rng.uniform(0.5, 0.95, size=6), rng.uniform(0.0, 1.0)
    assert chain_tokens(alphas) == pytest.approx(_simulated_tokens(alphas, 0.0, 200_000, seed), abs=0.02)
    oracle = chain_tokens(with_harmless(alphas, share))
    assert oracle == pytest.approx(_simulated_tokens(alphas, share, 200_000, seed + 10), abs=0.02)
    assert oracle_ratio(alphas, share) == pytest.approx(oracle / chain_tokens(alphas))


def test_ends_and_inverses():
    alphas = np.array([0.9, 0.8, 0.85, 0.7])
    assert chain_tokens(np.ones(4)) == 5 and chain_tokens(np.zeros(4)) == 1
    assert chain_tokens([0.5, 0.5]) == pytest.approx(1.75)
    assert oracle_ratio(alphas, 0.0) == pytest.approx(1.0)
    assert oracle_ratio(alphas, 1.0) == pytest.approx(5 / chain_tokens(alphas))
    ratios = [oracle_ratio(alphas, h) for h in np.linspace(0, 1, 11)]
    assert all(a < b for a, b in zip(ratios, ratios[1:]))
    assert share_needed(alphas, oracle_ratio(alphas, 0.37)) == pytest.approx(0.37, abs=1e-6)
    fitted = constant_alphas(chain_tokens(np.full(5, 0.83)), 5)
    assert fitted.shape == (5,) and fitted == pytest.approx(0.83)


def test_refusals_say_the_range():
    with pytest.raises(ValueError, match="between 1 and 6 tokens per cycle, got 6.5"):
        constant_alphas(6.5, 5)
    with pytest.raises(ValueError, match=r"in \[0, 1\], got 1.2"):
        with_harmless([0.9], 1.2)
    with pytest.raises(ValueError, match=r"gains between 1x and 1.053x \(every draft accepted\), asked 1.3x"):
        share_needed([0.9], 1.3)


def _inputs(tmp_path: Path, harmless: int, important: int, k: int = 3) -> list[str]:
    replays = {"replays": {"k16": {"lossless": 12.3, "oracle": 14.7}},
               "labels_by_kind": {"comment_other": {"important": 1, "unimportant": 3}}}
    alphas = {"depths": [{"depth": d + 1, "alpha": a} for d, a in enumerate([0.9, 0.85, 0.8, 0.2])]}
    lossless = {"k": k, "lossless": {"tokens_per_cycle": 3.2}}
    labels = [[10 + i, i < important, 5, 6] for i in range(harmless + important)]
    record = {"id": "q", "prompt_ids": [1], "final_ids": [1, 2], "labels": labels}
    paths = {name: tmp_path / f"{name}.json" for name in ("replays", "alphas", "lossless")}
    for name, data in (("replays", replays), ("alphas", alphas), ("lossless", lossless)):
        paths[name].write_text(json.dumps(data))
    (tmp_path / "labels.jsonl").write_text(json.dumps(record) + "\n")
    return ["--replays", str(paths["replays"]), "--alphas", str(paths["alphas"]), "--depth", str(k),
            "--lossless", str(paths["lossless"]), "--labels", str(tmp_path / "labels.jsonl")]


def test_script_reports_the_oracle_and_the_share_a_goal_needs(tmp_path, capsys):
    args = _inputs(tmp_path, harmless=30, important=70)
    assert MAIN(args + ["--goal", "1.1", "--out", str(tmp_path / "out.json")]) == 0
    out = json.loads((tmp_path / "out.json").read_text())
    assert out["harmless"]["share"] == pytest.approx(0.3) and out["harmless"]["labels"] == 100
    check = out["replay_check"][0]
    assert check["k"] == 16 and check["harmless_share"] == pytest.approx(0.75)
    assert check["model_oracle_ratio"] == pytest.approx(oracle_ratio(constant_alphas(12.3, 16), 0.75))
    per_depth = out["draft"]["per depth (alpha measured)"]
    assert per_depth["alphas"] == [0.9, 0.85, 0.8]
    assert per_depth["oracle_ratio"] == pytest.approx(oracle_ratio([0.9, 0.85, 0.8], 0.3))
    assert oracle_ratio([0.9, 0.85, 0.8], per_depth["share_needed_for_goal"]) == pytest.approx(1.1)
    fitted = out["draft"]["one alpha (fitted to decoding's lossless)"]
    assert fitted["lossless_tokens_per_cycle"] == pytest.approx(3.2)
    alpha = fitted["alphas"][0]
    assert out["longer_chains_fitted_alpha"]["12"] == pytest.approx(oracle_ratio(np.full(12, alpha), 0.3), abs=1e-3)
    assert out["longer_chains_fitted_alpha"]["16"] > out["longer_chains_fitted_alpha"]["8"]
    assert "needs a harmless share of" in capsys.readouterr().out
    assert MAIN(args + ["--goal", "2.0", "--out", str(tmp_path / "out2.json")]) == 0
    assert json.loads((tmp_path / "out2.json").read_text())["draft"]["per depth (alpha measured)"]["share_needed_for_goal"] is None


def test_script_refuses_a_chain_the_inputs_do_not_describe(tmp_path):
    args = _inputs(tmp_path, harmless=1, important=1)
    with pytest.raises(SystemExit, match="alphas for 4 depths: give --depth 4 or less"):
        MAIN(args[:5] + ["5"] + args[6:])
    with pytest.raises(SystemExit, match=r"decoded chains of 3 \(its 'k'\), not --depth 2"):
        MAIN(args[:5] + ["2"] + args[6:])
