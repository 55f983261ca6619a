"""The speed model (evaluation/speed_model.py) and its verb, on hand-made numbers and the tiny pair."""
import json

import numpy as np
import pytest
import torch

from tiny_models import tiny_pair
from trtllm_autojudge.cli import main as cli
from trtllm_autojudge.evaluation.speed_model import (OFFLOAD_REGIMES, StepCosts, measure_step_costs, parse_offload,
                                                     predicted_tokens_per_s, regime_table, speedup_over_target)


def test_the_speedup_tends_to_the_tokens_per_forward_as_the_target_forward_grows():
    """tau * r / (K + r): at r = K half of tau; as r grows, tau; a longer window costs more draft steps
    at small r and wins at large r when it emits more per forward."""
    assert speedup_over_target(12.0, 16, 16.0) == pytest.approx(6.0)
    assert speedup_over_target(12.0, 16, 1e9) == pytest.approx(12.0, rel=1e-6)
    r = np.array([2.0, 1000.0])
    k16, k64 = speedup_over_target(12.8, 16, r), speedup_over_target(23.0, 64, r)
    assert k16[0] > k64[0] and k64[1] > k16[1]


def test_predicted_tokens_per_s_is_tokens_over_the_cycle_cost():
    costs = StepCosts(draft_step_s=0.01, target_step_s=0.05, verify_s={16: 0.06})
    assert predicted_tokens_per_s(11.0, 16, costs) == pytest.approx(11.0 / (16 * 0.01 + 0.06))


def test_regime_table_compares_each_window_with_the_best_lossless_one():
    taus = {16: {"lossless": 12.0, "autojudge": 13.0}, 64: {"lossless": 23.0, "autojudge": 30.0}}
    slow, fast = regime_table(taus, 4.0), regime_table(taus, 1e6)
    assert slow["best_lossless_window"] == 16 and fast["best_lossless_window"] == 64
    assert slow["windows"]["64"]["autojudge_over_lossless"] == pytest.approx(30 / 23)  # the same cycle cost
    assert slow["windows"]["64"]["autojudge_over_best_lossless_window"] == pytest.approx(
        (30 * 4 / 68) / (12 * 4 / 20))
    assert fast["windows"]["64"]["autojudge_over_best_lossless_window"] == pytest.approx(30 / 23, rel=1e-4)


def test_offload_regimes_are_labelled_modelled_and_bad_ones_refused():
    assert all(g.source.startswith("modelled") and g.r > 100 for g in OFFLOAD_REGIMES)
    regime = parse_offload("70B over PCIe 5:141:50:3")
    assert regime.name == "70B over PCIe 5" and regime.r == pytest.approx((141 / 50) / 0.003)
    for bad in ("70B:141:50", "x:a:50:3", "x:141:0:3"):
        with pytest.raises(ValueError, match="--offload"):
            parse_offload(bad)


def test_step_costs_are_measured_for_each_window():
    target, draft = tiny_pair(seed=3)
    costs = measure_step_costs(target, draft, list(range(3, 40)), [2, 8], repeats=2)
    assert set(costs.verify_s) == {2, 8} and min(costs.draft_step_s, costs.target_step_s, *costs.verify_s.values()) > 0
    assert costs.as_dict()["verify_s"].keys() == {"2", "8"}


def _bench(tau_lossless, tau_judge, rate):
    """A bench JSON's fields the verb reads."""
    return {"dtype": "float32", "threads": torch.get_num_threads(), "questions": 3, "medians": {
        "target-only": {"tokens_per_s": rate, "tokens_per_forward": 1.0},
        "lossless": {"tokens_per_s": rate * 2, "tokens_per_forward": tau_lossless},
        "autojudge": {"tokens_per_s": rate * 2.2, "tokens_per_forward": tau_judge}}}


def test_the_verb_checks_the_model_against_bench_runs_and_writes_regimes(tmp_path, monkeypatch, capsys):
    target, draft = tiny_pair(seed=3)
    monkeypatch.setattr("trtllm_autojudge.evaluation.speed_model_cli.load_pair", lambda args, task: (target, draft, None))
    b2, b4 = tmp_path / "b2.json", tmp_path / "b4.json"
    b2.write_text(json.dumps(_bench(2.5, 2.8, 100.0)))
    b4.write_text(json.dumps(_bench(3.5, 4.2, 100.0)))
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"rows": [{"spec": "lossless", "tokens_per_cycle": 3.4, "questions": 9},
                                            {"spec": "judge@0.1", "tokens_per_cycle": 4.4, "questions": 9}]}))
    out, png = tmp_path / "model.json", tmp_path / "model.png"
    assert cli(["speed-model", "--bench", f"2:{b2}", "--bench", f"4:{b4}", "--window", f"4:{summary}:judge@0.1",
                "--offload", "mine:1:1:10", "--repeats", "2", "--out", str(out), "--plot", str(png)]) == 0
    result = json.loads(out.read_text())
    assert set(result["validation"]) == {"2", "4"} and result["step_costs"]["source"].startswith("measured")
    lossless = result["validation"]["2"]["lossless"]
    verify_2, draft_s = result["step_costs"]["verify_s"]["2"], result["step_costs"]["draft_step_s"]
    assert lossless["predicted_tokens_per_s"] == pytest.approx(2.5 / (2 * draft_s + verify_2))
    assert lossless["error"] == pytest.approx(lossless["predicted_tokens_per_s"] / 200.0 - 1)
    assert result["trusted"] == all(abs(r["error"]) <= 0.1 for rows in result["validation"].values() for r in rows.values())
    assert result["tokens_per_forward"]["4"]["autojudge"] == 4.4  # the window's summary, not the bench
    assert [g["name"] for g in result["regimes"]][-1] == "mine" and result["regimes"][-1]["r"] == pytest.approx(100.0)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "the model is" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**_bench(2.5, 2.8, 100.0), "threads": 99}))
    with pytest.raises(SystemExit, match="ran in float32 on 99 threads.*give the bench's --dtype and --threads"):
        cli(["speed-model", "--bench", f"2:{bad}", "--out", str(out)])
    with pytest.raises(SystemExit, match="holds the judge rows"):
        summary.write_text(json.dumps({"rows": [{"spec": "lossless", "tokens_per_cycle": 3.4, "questions": 9},
                                                {"spec": "judge@0.1", "tokens_per_cycle": 4.4, "questions": 9},
                                                {"spec": "judge@0.2", "tokens_per_cycle": 4.6, "questions": 9}]}))
        cli(["speed-model", "--bench", f"2:{b2}", "--window", f"4:{summary}", "--repeats", "1", "--out", str(out)])
    with pytest.raises(SystemExit):
        cli(["speed-model", "--out", str(out)])
    assert "give at least one --bench" in capsys.readouterr().err
