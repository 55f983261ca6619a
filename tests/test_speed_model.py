"""The speed model (evaluation/speed_model.py) and its verb, on hand-made numbers and the tiny pair."""
import json

import numpy as np
import pytest

from tiny_models import tiny_pair
from trtllm_autojudge.cli import main as cli
from trtllm_autojudge.evaluation.speed_model import (OFFLOAD_REGIMES, StepCosts, StepCostSampler, parse_offload,
                                                     predicted_target_only_tokens_per_s, predicted_tokens_per_s,
                                                     regime_table, speedup_over_target)


def test_the_speedup_tends_to_the_tokens_per_forward_as_the_target_forward_grows():
    """tau * r / (K + r): at r = K half of tau; as r grows, tau; a longer window costs more draft steps
    at small r and wins at large r when it emits more per forward."""
    assert speedup_over_target(12.0, 16, 16.0) == pytest.approx(6.0)
    assert speedup_over_target(12.0, 16, 1e9) == pytest.approx(12.0, rel=1e-6)
    r = np.array([2.0, 1000.0])
    k16, k64 = speedup_over_target(12.8, 16, r), speedup_over_target(23.0, 64, r)
    assert k16[0] > k64[0] and k64[1] > k16[1]
    # a question of n tokens also pays its prefill, one target forward: n r / (r + 1 + (n / tau)(K + r))
    assert speedup_over_target(12.0, 16, 16.0, tokens=120.0) == pytest.approx(120 * 16 / (17 + 10 * 32))
    assert speedup_over_target(12.0, 16, 16.0, tokens=1e9) == pytest.approx(6.0)
    assert speedup_over_target(24.0, 64, 1e9, tokens=120.0) == pytest.approx(120 / (1 + 5), rel=1e-6)


def test_predicted_tokens_per_s_is_tokens_over_the_prefills_and_the_cycles():
    costs = StepCosts(draft_step_s=0.01, target_step_s=0.05, verify_s={16: 0.06}, prefill_target_s=0.3,
                      prefill_draft_s=0.1)
    assert predicted_tokens_per_s(11.0, 16, costs, 110.0) == pytest.approx(110.0 / (0.4 + 10 * (16 * 0.01 + 0.06)))
    assert predicted_target_only_tokens_per_s(costs, 110.0) == pytest.approx(110.0 / (0.3 + 109 * 0.05))


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


def test_step_costs_are_sampled_for_each_window_and_survive_json():
    target, draft = tiny_pair(seed=3)
    sampler = StepCostSampler(target, draft, [8, 2])
    with pytest.raises(ValueError, match="call sample"):
        sampler.costs()
    sampler.sample([3, 4, 5], 2)
    sampler.sample(list(range(3, 90)), 1)
    costs = sampler.costs()
    assert set(costs.verify_s) == {2, 8} and costs.samples == 3 and len(sampler.prefills["target"]) == 2
    assert min(costs.draft_step_s, costs.target_step_s, *costs.verify_s.values(), costs.prefill_target_s,
               costs.prefill_draft_s) > 0
    assert all(session.cached_len == 300 for session in sampler.sessions.values())  # trimmed back to the prefix
    assert StepCosts.from_dict(json.loads(json.dumps(costs.as_dict()))) == costs


def _bench(tau_lossless, tau_judge, rate, k, draft_s=0.01, verify_s=0.05):
    """A bench JSON's fields the verb reads."""
    return {"dtype": "float32", "threads": 2, "questions": 3, "threshold": 0.1, "medians": {
        "target-only": {"tokens_per_s": rate, "tokens_per_forward": 1.0, "tokens_per_question": 40.0},
        "lossless": {"tokens_per_s": rate * 2, "tokens_per_forward": tau_lossless, "tokens_per_question": 40.0},
        "autojudge": {"tokens_per_s": rate * 2.2, "tokens_per_forward": tau_judge, "tokens_per_question": 42.0}},
        "step_costs": {"draft_step_s": draft_s, "target_step_s": 0.04, "verify_s": {str(k): verify_s},
                       "prefill_target_s": 0.2, "prefill_draft_s": 0.05, "samples": 9,
                       "source": "measured between this bench's questions, after 300 tokens"}}


def test_the_verb_checks_the_model_against_bench_runs_and_writes_regimes(tmp_path, capsys):
    b2, b4 = tmp_path / "b2.json", tmp_path / "b4.json"
    b2.write_text(json.dumps(_bench(2.5, 2.8, 100.0, 2)))
    b4.write_text(json.dumps(_bench(3.5, 4.2, 100.0, 4, draft_s=0.02, verify_s=0.06)))
    summary = tmp_path / "summary.json"
    summary.write_text(json.dumps({"rows": [{"spec": "lossless", "tokens_per_cycle": 3.4, "questions": 9, "new_tokens": 40},
                                            {"spec": "judge@0.1", "tokens_per_cycle": 4.4, "questions": 9,
                                             "new_tokens": 44}]}))
    out, png = tmp_path / "model.json", tmp_path / "model.png"
    assert cli(["speed-model", "--bench", f"2:{b2}", "--bench", f"4:{b4}", "--window", f"4:{summary}:judge@0.1",
                "--offload", "mine:1:1:10", "--out", str(out), "--plot", str(png)]) == 0
    result = json.loads(out.read_text())
    assert set(result["validation"]) == {"2", "4"} and result["step_costs"]["4"]["source"].startswith("measured")
    lossless = result["validation"]["2"]["lossless"]  # each run against its own step costs
    assert lossless["predicted_tokens_per_s"] == pytest.approx(40 / (0.25 + 40 / 2.5 * (2 * 0.01 + 0.05)))
    assert lossless["error"] == pytest.approx(lossless["predicted_tokens_per_s"] / 200.0 - 1)
    assert result["validation"]["4"]["autojudge"]["predicted_tokens_per_s"] == pytest.approx(
        42 / (0.25 + 42 / 4.2 * (4 * 0.02 + 0.06)))
    assert result["validation"]["2"]["target-only"]["predicted_tokens_per_s"] == pytest.approx(40 / (0.2 + 39 * 0.04))
    assert result["cpu"]["r"] == pytest.approx((4 + 2) / 2)  # the median of 0.04/0.01 and 0.04/0.02
    assert result["trusted"] == all(abs(r["error"]) <= 0.1 for rows in result["validation"].values() for r in rows.values())
    assert result["tokens_per_forward"]["4"]["autojudge"] == 4.4  # the window's summary, not the bench
    at_r = result["regimes"][-1]["windows"]["4"]["autojudge_over_target_only"]  # its tokens per question: 44 / 9
    assert at_r == pytest.approx((44 / 9) * 100 / (100 + 1 + (44 / 9) / 4.4 * (4 + 100)))
    assert [g["name"] for g in result["regimes"]][-1] == "mine" and result["regimes"][-1]["r"] == pytest.approx(100.0)
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "the model is" in capsys.readouterr().out
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({**_bench(2.5, 2.8, 100.0, 2), "threads": 99}))
    with pytest.raises(SystemExit, match=r"differ in threads \({4: 2, 2: 99}\): run them all with the same --threads"):
        cli(["speed-model", "--bench", f"4:{b4}", "--bench", f"2:{bad}", "--out", str(out)])
    bad.write_text(json.dumps({**_bench(2.5, 2.8, 100.0, 2), "step_costs": None}))
    with pytest.raises(SystemExit, match="holds no step costs: rerun `bench --k 2`"):
        cli(["speed-model", "--bench", f"2:{bad}", "--out", str(out)])
    with pytest.raises(SystemExit, match="timed verifies for K = \\[2\\], not 4: give it as --bench 2:"):
        cli(["speed-model", "--bench", f"4:{b2}", "--out", str(out)])
    with pytest.raises(SystemExit, match="holds the judge rows"):
        summary.write_text(json.dumps({"rows": [{"spec": "lossless", "tokens_per_cycle": 3.4, "questions": 9},
                                                {"spec": "judge@0.1", "tokens_per_cycle": 4.4, "questions": 9},
                                                {"spec": "judge@0.2", "tokens_per_cycle": 4.6, "questions": 9}]}))
        cli(["speed-model", "--bench", f"2:{b2}", "--window", f"4:{summary}", "--out", str(out)])
    with pytest.raises(SystemExit):
        cli(["speed-model", "--out", str(out)])
    assert "give at least one --bench" in capsys.readouterr().err
