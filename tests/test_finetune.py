"""The training scripts' shared pieces: the learning-rate schedule and resumable checkpoints."""
import math

import pytest
import torch

from trtllm_autojudge.models.finetune import load_checkpoint, lr_at, response_loss, save_checkpoint, token_weights


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


class _PieceTokenizer:
    """decode([i]) -> pieces[i]: enough of a tokenizer for token_weights."""

    def __init__(self, pieces):
        self.pieces = pieces

    def decode(self, ids):
        return "".join(self.pieces[i] for i in ids)


def test_token_weights_mark_comment_lines_and_skip_lines():
    pieces = ["<p>", "x", " =", " 3", "\n", "#", " add", " one", "\n", "  ", "# indented", "\n", "y", " = x", " # late", "\n", "z"]
    tokenizer, ids = _PieceTokenizer(pieces), list(range(len(pieces)))
    weights = token_weights(tokenizer, ids, start=1, comment_weight=0.25)
    assert [p for p, w in zip(pieces, weights) if w == 0.25] == ["#", " add", " one", "\n", "# indented", "\n"]
    assert weights[0] == 0.0  # before start: the prompt
    assert all(w == 1.0 for p, w in zip(pieces[1:], weights[1:]) if p in ("x", " = x", " # late", "z"))
    skipped = token_weights(tokenizer, ids, start=1, comment_weight=0.25, skip_lines=frozenset({1, 3}))
    # line 1 is "# add one", line 3 "y = x # late": their tokens (and the newlines ending them) weigh 0
    assert [p for p, w in zip(pieces, skipped) if w == 0.0] == ["<p>", "#", " add", " one", "\n", "y", " = x", " # late", "\n"]
    assert skipped[9:12] == [1.0, 0.25, 0.25] and skipped[-1] == 1.0  # "  " starts no comment by itself


def test_response_loss_weights_tokens():
    from tiny_models import tiny_pair

    target, _ = tiny_pair(seed=1)
    batch = [([5, 6, 7, 8, 9, 10], 2), ([11, 12, 13, 14], 1)]  # (ids, prompt tokens)
    weights = {id(batch[0]): [0, 0, 0.0, 0.0, 1, 1], id(batch[1]): [0, 0.0, 1, 1]}
    ones = {id(batch[0]): [0, 0, 1, 1, 1, 1], id(batch[1]): [0, 1, 1, 1]}
    with torch.no_grad():
        plain = response_loss(target.model, batch, pad_id=0)
        assert torch.allclose(response_loss(target.model, batch, 0, ones), plain)
        none_on_some = response_loss(target.model, batch, 0, weights)
        per_token = []
        for example in batch:  # the same loss by hand, zero-weight tokens dropped
            ids, n_prompt = example
            logits = target.model(torch.tensor([ids])).logits[0].float()  # [T, V]
            for j in range(n_prompt, len(ids)):
                if weights[id(example)][j]:
                    per_token.append(torch.nn.functional.cross_entropy(logits[j - 1][None], torch.tensor([ids[j]])))
        assert torch.allclose(none_on_some, torch.stack(per_token).mean(), atol=1e-5)
