"""The training scripts' shared pieces: the learning-rate schedule and resumable checkpoints."""
import math

import pytest
import torch

from trtllm_autojudge.backends.finetune import load_checkpoint, lr_at, save_checkpoint


def test_lr_warms_up_linearly_then_decays_to_zero():
    lrs = [lr_at(s, total=110, warmup=10, lr=1e-3) for s in range(110)]
    assert lrs[:10] == pytest.approx([1e-3 * (s + 1) / 10 for s in range(10)])
    assert lrs[10] == pytest.approx(1e-3) and max(lrs) == pytest.approx(1e-3)
    assert all(a >= b for a, b in zip(lrs[10:], lrs[11:]))  # monotone cosine decay
    assert lrs[60] == pytest.approx(1e-3 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert lr_at(110, total=110, warmup=10, lr=1e-3) == pytest.approx(0.0, abs=1e-12)


def test_checkpoint_round_trip_and_fresh_start(tmp_path):
    path = tmp_path / "ckpt.pt"
    assert load_checkpoint(path) is None
    save_checkpoint(path, {"step": 3, "w": torch.arange(4.0)})
    path.with_suffix(".tmp").write_bytes(b"a save cut short")  # a later save killed half-way
    state = load_checkpoint(path)
    assert state["step"] == 3 and torch.equal(state["w"], torch.arange(4.0))
    save_checkpoint(path, {"step": 4})
    assert load_checkpoint(path) == {"step": 4} and not path.with_suffix(".tmp").exists()
