"""Checking that decoding emitted the target's greedy tokens, up to the near-ties of its dtype."""
import torch

# Near-tie tolerance of the per-token check, relative to the row's largest logit: a few units of the
# dtype's rounding (bf16 keeps 8 significant bits). Two computations of the same logits that round
# differently (the verify's batched kernels against a one-token step) can swap such a tie.
NEAR_TIE = {torch.float32: 1e-5, torch.bfloat16: 2 ** -6}


def greedy_gaps(model, prompt, tokens):
    """[T]: how far each emitted token's logit lies below the row's best, teacher-forced in one forward."""
    with torch.inference_mode():
        logits = model.model(torch.tensor([list(prompt) + list(tokens)])).logits[0, len(prompt) - 1:-1].float()  # [T, V]
    best = logits.max(-1).values  # [T]
    return best - logits[torch.arange(len(tokens)), torch.tensor(tokens)], best.abs().clamp(min=1.0)
