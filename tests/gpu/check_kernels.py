"""Compare the CUDA kernels with the reference on fresh random inputs (part of tests/gpu/run_all.sh).

Accept mode: the kernels (through the CUDA binding of torch.ops.autojudge, with poisoned output
buffers) against JudgeRule + accept_tree (tests/lookahead_reference.py): vocab 128256, batch 1 to
256, chains up to K = 32, trees up to 64 nodes, fp32/fp16/bf16, the setups DT, DD-DT and the
lookahead ones DD-DT-DT1-DT2-DD1-LS and DT-DT1-DT2-LS (whose cases also run the C++ host core:
kernel == host core == Python), chains too short for a verdict, NaN/inf logits, a vocabulary that
breaks the 16-byte alignment. Logits mode: the kernels against the C++ host core, bit for bit, and
the host core against the rule, on packed TensorRT-LLM steps, DT and lookahead setups. Tree logits
mode: the kernels against the C++ host core, bit for bit, on EAGLE engine steps (trees up to 63
nodes, DT and DT-DT1-DT2-LS; the host core is checked against spec/tree_step.py in CI). Every mode
also runs a judge with a minimum run (min_run 3 or 4: only mismatches opening that many tokens
through exact matches are judged, JudgeRule.judgeable). Prints
"ok <case>" or "FAIL <case>: ..." per case; exits 1 on any failure.

``--smoke`` runs small versions of the same cases on the CPU (the host core stands in for the
kernels): it checks this script and its reference, not the kernels.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_cases as cases  # noqa: E402
from gpu_cases import LOOKAHEAD_SETUP  # noqa: E402
from trtllm_autojudge.decoding.tree import DraftTree  # noqa: E402
from trtllm_autojudge.ops.host_library import host_core  # noqa: E402
from trtllm_autojudge.ops.torch_ops import accept, rewrite_logits, rewrite_tree_logits  # noqa: E402
from trtllm_autojudge.spec import packed_step  # noqa: E402

POISON = -777
TARGET_ONLY = "DT-DT1-DT2-LS"  # a lookahead setup the stock route can feed


def run_accept(case: cases.AcceptCase) -> tuple[torch.Tensor, ...]:
    if case.target_logits.is_cuda:
        from trtllm_autojudge.ops.cuda_extension import cuda_extension
        B, D1 = case.draft_tokens.shape[0], case.paths.shape[2]
        poison = lambda *shape: torch.full(shape, POISON, dtype=torch.int32, device="cuda")  # noqa: E731
        out = cuda_extension().accept(*case.extension_args(), poison(B, D1), poison(B), poison(B), poison(B))
        torch.cuda.synchronize()
        return tuple(out)
    return tuple(accept(*case.op_args()))


def check_accept(case: cases.AcceptCase, numpy_argmax: bool = False, host_too: bool = False
                 ) -> tuple[str | None, str]:
    """The kernels (or, with --smoke, the host core) against the rule; with ``host_too`` also the host
    core on the same inputs moved to the CPU; (problem, how many mismatches were judged)."""
    want = cases.reference_accept(case, numpy_argmax)
    runs = [("kernels", run_accept(case))]
    if host_too and case.target_logits.is_cuda:
        runs.append(("host core", tuple(accept(*case.on("cpu").op_args()))))
    for who, out in runs:
        got = [t.cpu().numpy() for t in out]
        for name, g, w in zip(("accepted_tokens", "accepted_lens", "best_path", "judged_count"), got,
                              (want.accepted_tokens, want.accepted_len, want.best_path, want.judged_count)):
            if not np.array_equal(g, w):
                bad = np.argwhere(g != w)[:3].tolist()
                return (f"{who}: {name} differs at {bad}: got {g[tuple(np.array(bad).T)]}, "
                        f"want {w[tuple(np.array(bad).T)]}"), ""
    return None, f"({int(want.judged_count.sum())} judged)"


def bits(t: torch.Tensor) -> np.ndarray:
    """Raw bits of a tensor, for exact comparisons (NaN == NaN)."""
    t = t.detach().cpu().contiguous()
    return t.view(torch.int32 if t.element_size() == 4 else torch.int16).numpy()


def check_rewrite(step: cases.PackedStep) -> tuple[str | None, str]:
    """The logits-mode kernels against the host core, bit for bit, and the host core against the rule
    (packed_step.rewrite_logits with the rule's judge logits); (problem, how many rows changed)."""
    if step.target_logits.is_cuda:
        from trtllm_autojudge.ops.cuda_extension import cuda_extension
        poisoned = torch.full_like(step.target_logits, float("nan"))
        got = cuda_extension().rewrite_logits(*step.extension_args(), poisoned)
        torch.cuda.synchronize()
    else:
        got = rewrite_logits(*step.op_args())
    core = host_core()
    logits = cases.host_array(step.target_logits)
    sequences = step.sequences()
    argmax, judge = core.judge_rows(logits, cases.host_array(step.target_hidden), *sequences,
                                    cases.host_array(step.judge_weight), step.judge_bias, step.setup,
                                    None if step.draft_hidden is None else cases.host_array(step.draft_hidden),
                                    step.min_run)
    want = core.rewrite_logits(logits, argmax, judge, *sequences, step.threshold, step.min_run)
    rule = packed_step.rewrite_logits(logits, argmax, step.judge_logit, *sequences, step.threshold)
    if not np.array_equal(want.view(np.uint8), rule.view(np.uint8)):
        rows = np.unique(np.argwhere(want != rule)[:, 0])[:5].tolist()
        return f"the host core's rewritten logits differ from the rule's in rows {rows}", ""
    got_bits = bits(got)
    want_bits = want.view(got_bits.dtype)
    if not np.array_equal(got_bits, want_bits):
        rows = np.unique(np.argwhere(got_bits != want_bits)[:, 0])[:5].tolist()
        return f"rewritten logits differ from the host core in rows {rows}", ""
    changed = int((got_bits != bits(step.target_logits)).any(axis=1).sum())
    return None, f"({changed} of {len(got_bits)} rows rewritten)"


def check_tree_rewrite(case: cases.TreeCase) -> tuple[str | None, str]:
    """The tree-logits-mode kernels against the host core, bit for bit; (problem, how many rows changed)."""
    if case.target_logits.is_cuda:
        from trtllm_autojudge.ops.cuda_extension import cuda_extension
        poisoned = torch.full_like(case.target_logits, float("nan"))
        got = cuda_extension().rewrite_tree_logits(*case.extension_args(), poisoned)
        torch.cuda.synchronize()
    else:
        got = rewrite_tree_logits(*case.op_args())
    core, logits = host_core(), cases.host_array(case.target_logits)
    greedy = None if case.greedy_child is None else case.greedy_child.cpu().numpy()
    argmax, judge = core.judge_tree_rows(logits, cases.host_array(case.target_hidden), *case.host_args(),
                                         cases.host_array(case.judge_weight), case.judge_bias, case.setup, greedy,
                                         case.min_run)
    want = core.rewrite_tree_logits(logits, argmax, judge, *case.host_args(), case.threshold.cpu().numpy(),
                                    case.min_run)
    got_bits = bits(got)
    want_bits = want.view(got_bits.dtype)
    if not np.array_equal(got_bits, want_bits):
        rows = np.unique(np.argwhere(got_bits != want_bits)[:, 0])[:5].tolist()
        return f"rewritten logits differ from the host core in rows {rows}", ""
    changed = int((got_bits != bits(case.target_logits)).any(axis=1).sum())
    return None, f"({changed} of {len(got_bits)} rows rewritten)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="small cases on the CPU (checks this script only)")
    args = parser.parse_args(argv)
    device = "cpu" if args.smoke else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("FAIL setup: no CUDA device visible to torch")
        return 1
    V = 1000 if args.smoke else 128256
    hidden = dict(target_hidden=64, draft_hidden=32) if args.smoke else {}
    batch = (lambda b: min(b, 8)) if args.smoke else (lambda b: b)
    accept_cases = []  # (name, accept_case arguments, host core too)
    for i, dtype in enumerate(cases.DTYPES):
        accept_cases += [
            (f"{dtype} chain K=16 B=1 DT", dict(batch=1, tree=cases.chain(16), dtype=dtype, setup="DT"), False),
            (f"{dtype} chain K=32 B=256 DT", dict(batch=batch(256), tree=cases.chain(32), dtype=dtype, setup="DT"),
             False),
            (f"{dtype} chain K=1 B=33 DD-DT", dict(batch=batch(33), tree=cases.chain(1), dtype=dtype, setup="DD-DT"),
             False),
            (f"{dtype} random tree 63 nodes B=64 DD-DT",
             dict(batch=batch(64), tree=cases.random_tree(63, seed=i), dtype=dtype, setup="DD-DT"), False),
            (f"{dtype} static tree [2,2,2,2,2] B=8 DT",
             dict(batch=8, tree=DraftTree.static([2, 2, 2, 2, 2]), dtype=dtype, setup="DT"), False),
            (f"{dtype} chain K=16 B=8 {LOOKAHEAD_SETUP}",
             dict(batch=8, tree=cases.chain(16), dtype=dtype, setup=LOOKAHEAD_SETUP), True),
            (f"{dtype} random tree 63 nodes B=4 {TARGET_ONLY}",
             dict(batch=4, tree=cases.random_tree(63, seed=10 + i), dtype=dtype, setup=TARGET_ONLY), True),
            (f"{dtype} static tree [3,2,2,1] B=4 {LOOKAHEAD_SETUP}",
             dict(batch=4, tree=DraftTree.static([3, 2, 2, 1]), dtype=dtype, setup=LOOKAHEAD_SETUP), True),
        ]
    accept_cases += [
        ("fp32 logits + bf16 hidden, chain K=8 B=99 DD-DT",
         dict(batch=batch(99), tree=cases.chain(8), dtype="fp32", setup="DD-DT", hidden_dtype="bf16"), False),
        (f"fp32 logits + bf16 hidden, chain K=8 B=16 {LOOKAHEAD_SETUP}",
         dict(batch=16, tree=cases.chain(8), dtype="fp32", setup=LOOKAHEAD_SETUP, hidden_dtype="bf16"), True),
        (f"bf16 chain K=2 B=4 {LOOKAHEAD_SETUP} (no verdict)",
         dict(batch=4, tree=cases.chain(2), dtype="bf16", setup=LOOKAHEAD_SETUP), True),
        # the judge's minimum run (accept_core.h markJudgeable): only mismatches opening min_run tokens are judged
        ("bf16 chain K=16 B=64 DT min_run 3",
         dict(batch=batch(64), tree=cases.chain(16), dtype="bf16", setup="DT", min_run=3), True),
        ("fp16 random tree 63 nodes B=16 DD-DT min_run 4",
         dict(batch=16, tree=cases.random_tree(63, seed=3), dtype="fp16", setup="DD-DT", min_run=4), True),
        (f"fp32 static tree [3,2,2,1] B=8 {LOOKAHEAD_SETUP} min_run 3",
         dict(batch=8, tree=DraftTree.static([3, 2, 2, 1]), dtype="fp32", setup=LOOKAHEAD_SETUP, min_run=3), True),
    ]
    failures = 0
    start = time.perf_counter()
    for seed, (name, spec, host_too) in enumerate(accept_cases):
        case = cases.accept_case(name, vocab=V, device=device, seed=seed, **spec, **hidden)
        failures += report(name, *check_accept(case, host_too=host_too))
        del case
    for dtype in cases.DTYPES:  # NaN / inf rows (NumPy's argmax is the reference), odd vocabulary sizes
        for vocab in (111, 32001):
            for setup in ("DD-DT", LOOKAHEAD_SETUP):
                case = cases.accept_case(f"{dtype} V={vocab}", 7, cases.chain(5), vocab, dtype, setup, device,
                                         seed=vocab, **hidden)
                case.target_logits[1, 3] = float("nan")
                case.target_logits[2, :] = float("-inf")
                case.target_logits[4, vocab - 1] = float("inf")
                failures += report(f"{dtype} V={vocab} {setup} NaN/inf rows, unaligned rows",
                                   *check_accept(cases.judged(case), numpy_argmax=True,
                                                 host_too=setup == LOOKAHEAD_SETUP))
    for dtype in cases.DTYPES:
        for requests, setup in ((3, "DT"), (64, "DT"), (16, TARGET_ONLY), (16, LOOKAHEAD_SETUP)):
            step = cases.packed_step(requests, 8, V, dtype, device, seed=requests, setup=setup, **hidden)
            failures += report(f"logits mode {dtype} {requests} requests {setup}", *check_rewrite(step))
        step = cases.packed_step(16, 8, V, dtype, device, seed=5, setup=TARGET_ONLY, min_run=3, **hidden)
        failures += report(f"logits mode {dtype} 16 requests {TARGET_ONLY} min_run 3", *check_rewrite(step))
    for dtype in cases.DTYPES:
        for seed, setup in enumerate(("DT", TARGET_ONLY, "DT", TARGET_ONLY)):
            case = cases.tree_case(V, dtype, device, seed=seed, setup=setup, target_hidden=hidden.get("target_hidden",
                                                                                                     4096))
            failures += report(f"tree logits mode {dtype} {len(case.draft_lens)} requests {setup} seed {seed}",
                               *check_tree_rewrite(case))
        case = cases.tree_case(V, dtype, device, seed=7, setup="DT", target_hidden=hidden.get("target_hidden", 4096),
                               min_run=3)
        failures += report(f"tree logits mode {dtype} {len(case.draft_lens)} requests DT min_run 3",
                           *check_tree_rewrite(case))
    print(f"{'FAILED' if failures else 'all cases agree'}: {failures} failure(s), "
          f"{time.perf_counter() - start:.0f} s")
    return 1 if failures else 0


def report(name: str, problem: str | None, note: str = "") -> int:
    print(f"ok   {name} {note}".rstrip() if problem is None else f"FAIL {name}: {problem}", flush=True)
    return 0 if problem is None else 1


if __name__ == "__main__":
    sys.exit(main())
