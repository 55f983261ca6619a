"""The CPU route's command-line options, shared by ``make-triton-repo --route cpu`` and ``trtllm-autojudge serve``:
the pair as ``trtllm-autojudge generate`` names it, and the draft-tree limits of the repository."""
from __future__ import annotations

import argparse

from ...models.dtype import CHOICES as DTYPES
from ...kernels.row_linear import CHOICES as CPU_LINEARS
from .cpu import ReferencePair


def add_cpu_route_args(group) -> None:
    defaults = ReferencePair()
    group.add_argument("--task", default=defaults.task,
                       help=f"the prompt format and the shipped models (default {defaults.task})")
    group.add_argument("--target", default=defaults.target, help="'tuned', 'raw' or a local HF checkpoint folder")
    group.add_argument("--draft", default=defaults.draft, help="'embedded', a draft file or a local HF checkpoint folder")
    group.add_argument("--draft-vocab", default=defaults.draft_vocab, help="as `generate` takes it (default auto)")
    group.add_argument("--judge", default=None, help="judge file (default: the task's shipped judge for the embedded "
                       "pair on a chain of --max-draft-tokens, as generate --k picks it)")
    group.add_argument("--dtype", default=defaults.dtype, choices=DTYPES)
    group.add_argument("--cpu-linear", default=defaults.cpu_linear, choices=CPU_LINEARS)
    group.add_argument("--threads", type=int, default=None,
                       help="torch CPU threads of each stand-in, shared by the requests it holds")
    group.add_argument("--max-draft-tokens", type=int, default=16, help="the largest num_draft_tokens a request may ask")
    group.add_argument("--max-draft-width", type=int, default=1, help="the largest draft_width a request may ask")


def cpu_route_from_args(args: argparse.Namespace) -> tuple[ReferencePair, dict]:
    """The pair, and the other keyword arguments of :func:`.cpu.make_cpu_repository`."""
    pair = ReferencePair(target=args.target, draft=args.draft, draft_vocab=args.draft_vocab, task=args.task,
                         dtype=args.dtype, cpu_linear=args.cpu_linear, threads=args.threads)
    return pair, dict(judge=args.judge, max_draft_tokens=args.max_draft_tokens, max_draft_width=args.max_draft_width)
