"""The training scripts' shared pieces: the learning-rate schedule and resumable checkpoints."""
import math

import pytest
import torch

from trtllm_autojudge.backends.finetune import comment_mask, load_checkpoint, lr_at, response_loss, save_checkpoint


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
    """decode([i]) -> pieces[i]: enough of a tokenizer for comment_mask."""

    def __init__(self, pieces):
        self.pieces = pieces

    def decode(self, ids):
        return "".join(self.pieces[i] for i in ids)


def test_comment_mask_marks_the_tokens_of_comment_lines():
    pieces = ["<p>", "x", " =", " 3", "\n", "#", " add", " one", "\n", "  ", "# indented", "\n", "y", " = x", " # late"]
    mask = comment_mask(_PieceTokenizer(pieces), list(range(len(pieces))), start=1)
    assert [p for p, m in zip(pieces, mask) if m] == ["#", " add", " one", "\n", "# indented", "\n"]
    assert not mask[0]  # before start: the prompt


def test_response_loss_weights_comment_tokens():
    from tiny_models import tiny_pair

    target, _ = tiny_pair(seed=1)
    batch = [([5, 6, 7, 8, 9, 10], 2), ([11, 12, 13, 14], 1)]  # (ids, prompt tokens)
    masks = {id(batch[0]): [False, False, True, True, False, False], id(batch[1]): [False, True, False, False]}
    with torch.no_grad():
        plain = response_loss(target.model, batch, pad_id=0)
        assert torch.allclose(response_loss(target.model, batch, 0, masks, 1.0), plain)
        none_on_comments = response_loss(target.model, batch, 0, masks, 0.0)
        per_token = []
        for example in batch:  # the same loss by hand, comment tokens dropped
            ids, n_prompt = example
            logits = target.model(torch.tensor([ids])).logits[0].float()  # [T, V]
            for j in range(n_prompt, len(ids)):
                if not masks[id(example)][j]:
                    per_token.append(torch.nn.functional.cross_entropy(logits[j - 1][None], torch.tensor([ids[j]])))
        assert torch.allclose(none_on_comments, torch.stack(per_token).mean(), atol=1e-5)
