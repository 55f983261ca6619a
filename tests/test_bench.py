"""`bench` on the tiny pair: the roofline's parts and the bench_cpu.json keys, measured in one run."""
import numpy as np
import pytest
import torch

from eagle_heads import first_layer_head
from tiny_models import tiny_pair
from trtllm_autojudge.decoding.dynamic_tree import DynamicTree
from trtllm_autojudge.decoding.eagle_drafter import EagleDrafter
from trtllm_autojudge.decoding.speculative import greedy_generate
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.evaluation.bench import BenchMode, assisted_mode, mode_order, run_bench, speculative_modes, target_only_mode
from trtllm_autojudge.evaluation.runner import Question
from trtllm_autojudge.evaluation.speed_model import StepCostSampler
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.kernels.roofline import Roofline, copy_bandwidth, step_seconds, weight_bytes


def test_weight_bytes_counts_tied_tensors_once():
    target, _ = tiny_pair(seed=0)
    model = target.model
    expect = sum(p.numel() * 4 for p in model.parameters())
    assert weight_bytes(model) == expect
    model.lm_head.weight = model.model.embed_tokens.weight  # tie: the same tensor is read once per step
    assert weight_bytes(model) == expect - model.lm_head.weight.numel() * 4
    assert weight_bytes(model.to(torch.bfloat16)) == (expect - model.lm_head.weight.numel() * 4) // 2


def test_roofline_parts_are_measured():
    target, _ = tiny_pair(seed=0)
    bw = copy_bandwidth(nbytes=8 * 2**20, repeats=2)
    assert 1e8 < bw < 1e13  # bytes/s of a real copy: between 0.1 GB/s and 10 TB/s
    step, cpu = step_seconds(target, [5, 6, 7], repeats=3)
    assert 0 < step < 5 and 0 < cpu < 5
    r = Roofline(weight_bytes(target.model), bw, step, cpu)
    assert r.bound_s == r.weight_bytes / bw and r.step_over_bound == step / r.bound_s
    assert r.cpu_step_over_bound == cpu / r.bound_s
    assert "x the bound" in r.table()


def test_bench_reports_every_mode_and_the_roofline():
    target, draft = tiny_pair(seed=0)
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    judge = JudgeHead(np.zeros(F), np.zeros(F), np.ones(F), 0.0, "DT", draft.hidden_size, target.hidden_size, 0.5)
    questions = [Question(f"q{i}", [3 + i, 9, 17], None) for i in range(2)]
    F2 = feature_dim("DD-DT", draft.hidden_size, target.hidden_size)
    other = JudgeHead(np.zeros(F2), np.zeros(F2), np.ones(F2), 0.0, "DD-DT", draft.hidden_size, target.hidden_size, 0.3)
    out = run_bench(target, questions, modes(target, draft, [JudgeRule(judge), JudgeRule(other)]), repeats=2)
    for key in ("target_only_tokens_per_s", "lossless_tokens_per_s", "autojudge_tokens_per_s", "bound_ms_per_step",
                "step_ms"):
        assert out[key] > 0, key
    med = out["medians"]
    assert out["lossless_tokens_per_s"] == med["lossless"]["tokens_per_s"]
    assert np.isclose(out["ratios"]["lossless / target-only"],
                      med["lossless"]["tokens_per_s"] / med["target-only"]["tokens_per_s"])
    assert all(m["tokens_per_cpu_s"] > 0 for m in med.values())
    assert med["target-only"]["tokens_per_forward"] == 1.0 and med["lossless"]["tokens_per_forward"] >= 1.0
    assert np.isclose(out["step_over_bound"], out["step_ms"] / out["bound_ms_per_step"])
    assert "roofline:" in out["table"] and "lossless / target-only" in out["table"]
    assert set(med) == {"target-only", "lossless", "autojudge", "autojudge-2"}  # the second judge: one more mode
    assert out["judges"] == {"autojudge": {"setup": "DT", "threshold": 0.5},
                             "autojudge-2": {"setup": "DD-DT", "threshold": 0.3}}
    assert out["autojudge_tokens_per_s"] == med["autojudge"]["tokens_per_s"] and out["threshold"] == 0.5
    # every ratio carries a bootstrap interval over the 2 questions, in the table too
    assert set(out["ratio_intervals"]) == set(out["ratios"])
    for lo, hi in out["ratio_intervals"].values():
        assert 0 < lo <= hi
    assert "[95% over questions]" in out["table"]
    assert np.isclose(out["ratios"]["autojudge-2 / lossless"],
                      med["autojudge-2"]["tokens_per_s"] / med["lossless"]["tokens_per_s"])
    assert "autojudge-2: DD-DT judge, threshold 0.3" in out["table"]


def test_bench_samples_the_step_costs_after_each_question_run():
    """The speed model's step costs come from the bench's own minutes: one sample per question run."""
    target, draft = tiny_pair(seed=0)
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    judge = JudgeHead(np.zeros(F), np.zeros(F), np.ones(F), 0.0, "DT", draft.hidden_size, target.hidden_size, 0.5)
    questions = [Question(f"q{i}", [3 + i, 9, 17], None) for i in range(2)]
    assert run_bench(target, questions, modes(target, draft, [JudgeRule(judge)]), repeats=1)["step_costs"] is None
    sampler = StepCostSampler(target, draft, [3])
    out = run_bench(target, questions, modes(target, draft, [JudgeRule(judge)]), repeats=2, step_costs=sampler)
    assert out["step_costs"]["samples"] == 2 * 2 * 3  # 2 repeats x 2 questions x 3 forwards each
    assert set(out["step_costs"]["verify_s"]) == {"3"} and out["step_costs"]["source"].startswith("measured between")
    assert out["step_costs"]["prefill_target_s"] > 0 and out["medians"]["lossless"]["tokens_per_question"] > 0


def modes(target, draft, rules, new=8):
    return [target_only_mode(target, new), *speculative_modes(target, draft, DraftTree.chain(3), rules, new)]


def test_bench_needs_a_judge():
    target, draft = tiny_pair(seed=0)
    with pytest.raises(ValueError, match="at least one judge"):
        run_bench(target, [Question("q", [3, 9], None)], modes(target, draft, []), repeats=1)


def test_an_eagle_heads_modes_and_assisted_generation_run_beside_the_others():
    """A second drafter's modes are compared with their own lossless; assisted generation emits the
    target's greedy tokens (same count) and has no observable target forwards."""
    target, draft = tiny_pair(seed=0)
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    judge = JudgeRule(JudgeHead(np.zeros(F), np.zeros(F), np.ones(F), -1.0, "DT", draft.hidden_size,
                                target.hidden_size, 0.5))
    eagle = EagleDrafter(target, first_layer_head(target))
    questions = [Question(f"q{i}", [3 + i, 9, 17], None) for i in range(2)]
    all_modes = [*modes(target, draft, [judge]), *speculative_modes(target, eagle, DynamicTree(2, 2, 3), [judge], 8,
                                                                     prefix="eagle-"), assisted_mode(target, draft, 8)]
    out = run_bench(target, questions, all_modes, repeats=1)
    assert out["modes"] == ["target-only", "lossless", "autojudge", "eagle-lossless", "eagle-autojudge", "assisted"]
    assert {"eagle-lossless / lossless", "eagle-autojudge / eagle-lossless", "assisted / target-only",
            "assisted / lossless"} <= set(out["ratios"])
    assert "eagle-autojudge / lossless" not in out["ratios"]
    assert out["medians"]["assisted"]["tokens_per_forward"] is None and "eagle-autojudge: DT judge" in out["table"]
    for q in questions:
        greedy = greedy_generate(target, q.prompt_ids, 8)
        assert all_modes[-1].generate(q)[0] == len(greedy) == all_modes[1].generate(q)[0]


def test_each_question_runs_every_mode_once_in_an_order_of_its_own():
    target, draft = tiny_pair(seed=0)
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    judge = JudgeHead(np.zeros(F), np.zeros(F), np.ones(F), 0.0, "DT", draft.hidden_size, target.hidden_size, 0.5)
    seen = []  # (question, mode) in the order they ran

    def recorded(m: BenchMode) -> BenchMode:
        def generate(q):
            seen.append((q.qid, m.name))
            return m.generate(q)
        return BenchMode(m.name, generate, m.versus, m.rule)

    modes = [recorded(m) for m in [target_only_mode(target, 2), *speculative_modes(target, draft, DraftTree.chain(2),
                                                                                  [JudgeRule(judge)], 2)]]
    assert [m.name for m in mode_order(modes, 4)] == [m.name for m in mode_order(modes, 4)]  # reproducible
    n = 12
    run_bench(target, [Question(f"q{i}", [3 + i % 5, 9], None) for i in range(n)], modes, repeats=1)
    orders = [tuple(name for _, name in seen[3 * i: 3 * i + 3]) for i in range(n)]
    assert all(sorted(o) == ["autojudge", "lossless", "target-only"] for o in orders)
    assert [q for q, _ in seen[::3]] == [f"q{i}" for i in range(n)]  # each question runs in every mode in a row
    assert {o[0] for o in orders} == {"target-only", "lossless", "autojudge"}  # each mode runs first somewhere
    before = {(o[j], o[j + 1]) for o in orders for j in range(2)}
    assert ("lossless", "autojudge") in before and ("autojudge", "lossless") in before  # no fixed predecessor
