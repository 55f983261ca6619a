"""Token ids of the tiny random pair read as short programs: ``answer = `` + one character per token."""
import torch

from tiny_models import VOCAB

PROGRAM_CHARS = "0123456789+-*/ \n()"


def decode_program(ids) -> str:
    return "answer = " + "".join(PROGRAM_CHARS[int(i) % len(PROGRAM_CHARS)] for i in ids)


def program_prompts(n: int = 5, seed: int = 1):
    g = torch.Generator().manual_seed(seed)
    return [(f"p{i}", torch.randint(3, VOCAB, (5,), generator=g).tolist(), None) for i in range(n)]
