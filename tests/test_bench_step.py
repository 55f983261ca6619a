"""experiments/bench_step.py: the three bf16 layouts of one model give bit-identical logits and the two
float32 ones logits equal up to rounding, each is the layout it names, and the timings and the
weight-read floor come out for each."""
import runpy
from pathlib import Path

import pytest
import torch

from tiny_models import tiny_pair
from trtllm_autojudge.kernels.cpu_linear import PackedLinear, can_pack
from trtllm_autojudge.kernels.roofline import read_seconds
from trtllm_autojudge.kernels.row_linear import RowLinear
from trtllm_autojudge.kernels.sibling_linear import SiblingLinear
from test_row_linear import kernel

STEP = runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "bench_step.py"))


@pytest.mark.skipif(not can_pack(torch.bfloat16, "cpu"), reason="no oneDNN bf16 here: it needs an AVX-512 CPU and a torch build with oneDNN")
def test_layouts_are_what_they_name_and_agree_bitwise():
    target, _ = tiny_pair(seed=0)
    lms = STEP["layouts"](target)
    attn = {name: lm.model.model.layers[0].self_attn for name, lm in lms.items()}
    assert type(attn["linear"].q_proj) is torch.nn.Linear and lms["linear"].dtype == torch.bfloat16
    assert type(attn["packed"].q_proj) is PackedLinear and type(attn["stacked"].q_proj) is SiblingLinear
    assert target.dtype == torch.float32  # the source model is left as it was
    prefix = list(range(3, 40))
    assert STEP["same_logits"](lms, prefix)
    times = STEP["measure"](lms, prefix, k=3, repeats=2)
    assert set(times) == {"linear", "packed", "stacked"}
    assert all(t["step_ms"] > 0 and t["verify_ms"] > 0 for t in times.values())
    assert all(STEP["matmul_ms"](lm, repeats=2) > 0 for lm in lms.values())
    assert read_seconds(lms["stacked"].model, repeats=2) > 0


def test_float32_layouts_are_what_they_name_and_agree_up_to_rounding():
    kernel()  # skips, saying why, where the kernel cannot be built
    target, _ = tiny_pair(seed=0)
    lms = STEP["layouts"](target, torch.float32)
    attn = {name: lm.model.model.layers[0].self_attn for name, lm in lms.items()}
    assert type(attn["linear"].q_proj) is torch.nn.Linear and type(attn["rows"].q_proj) is RowLinear
    assert target.model.lm_head is not lms["rows"].model.lm_head  # the source model is left as it was
    prefix = list(range(3, 40))
    assert STEP["same_logits"](lms, prefix, exact=False)
    times = STEP["measure"](lms, prefix, k=3, repeats=2)
    assert set(times) == {"linear", "rows"} and all(t["step_ms"] > 0 for t in times.values())
    assert all(STEP["matmul_ms"](lm, repeats=2) > 0 for lm in lms.values())
