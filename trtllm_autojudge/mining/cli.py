"""`trtllm-autojudge mine`: label mining on a draft/target pair (run under mpirun to shard)."""
from __future__ import annotations

import argparse
import hashlib
import json
import sys

from ..data.sources import add_problem_args, load_problems
from ..decoding.modes import JudgeRule
from ..decoding.tree import DraftTree
from ..judge.head import JudgeHead
from ..models.dtype import dtype_name
from ..decoding.loading import load_pair
from ..models.loading import EMBEDDED_TARGETS, add_model_args
from ..tasks import add_task_args, task_from_args
from .miner import MiningConfig
from .mpi import world
from .on_policy import OnPolicyMiner
from .run import DEFAULT_WINDOWS, LOCAL_REGENERATORS, local_regenerator, make_miner, mine_prompts, parse_windows


def problem_id(question: str) -> str:
    return hashlib.sha1(question.encode()).hexdigest()[:12]


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="trtllm-autojudge mine", description=__doc__)
    p.add_argument("--out", required=True, help="label file (JSONL, append-only; rerun to resume)")
    p.add_argument("--max-new-tokens", type=int, default=256)
    p.add_argument("--no-early-stop", action="store_true",
                   help="regenerate to EOS/budget instead of stopping once the answer is fixed (the same labels: "
                        "positions after a fixed answer are never labelled, unlike the research code; docs/design.md)")
    p.add_argument("--no-cache-reuse", action="store_true", help="recompute every prefix (the plain algorithm)")
    p.add_argument("--max-minutes", type=float, default=None,
                   help="start no new prompt after this many minutes (rerun to continue)")
    p.add_argument("--batch-size", type=int, default=1,
                   help="prompts mined together (target regenerations batched; >1 may flip float32 near-ties)")
    add_task_args(p)
    p.add_argument("--speculation-depth", type=int, default=8,
                   help="regenerations requested at once per prompt (1: the plain loop; same labels for every "
                        "depth, batching may flip float32 near-ties)")
    p.add_argument("--skip-unlikely", type=float, default=0.0, metavar="P",
                   help="research-code shortcut, CHANGES LABELS: a draft token with target probability < P is "
                        "labelled important without regeneration (the research code uses 0.01; default off)")
    p.add_argument("--regenerator", choices=(*LOCAL_REGENERATORS, "trtllm"), default="transformers",
                   help="backend serving the target's regenerations: transformers (batched, prefix KV reuse), "
                        "lookup (each regeneration verifies windows of the sequence it branched from: fastest where a "
                        "swap leaves the rest of the text alike, e.g. programs; with --batch-size > 1 the rows of "
                        "the batched backend do), lookup-draft (lookup, with the draft proposing where the text "
                        "departs from it; --batch-size 1) "
                        "or the TensorRT-LLM LLM API (GPU hosts; needs --target PATH)")
    p.add_argument("--lookup-windows", default=DEFAULT_WINDOWS, metavar="MIN:MAX",
                   help="window sizes of the lookup regenerators: a window starts at MIN tokens, doubles after a fully "
                        f"accepted one up to MAX, and drops to MIN after a rejection (default {DEFAULT_WINDOWS}; docs/mining.md)")
    p.add_argument("--trtllm-max-seq-len", type=int, default=4096, help="max_seq_len of the TensorRT-LLM target")
    g = p.add_argument_group("on-policy labels (mining/on_policy.py)")
    g.add_argument("--on-policy", default=None, metavar="JUDGE",
                   help="label the acceptances of this judge file along its own decoding, instead of the target's "
                        "response's mismatches (the regeneration options above do not apply)")
    g.add_argument("--on-policy-threshold", type=float, default=None,
                   help="the judge's threshold while decoding (default: the file's own)")
    g.add_argument("--k", type=int, default=16, help="chain draft of the on-policy decoding: K tokens per cycle (default 16)")
    add_model_args(p)
    add_problem_args(p, split="train", variants=2)
    args = p.parse_args(argv)
    task = task_from_args(args)
    problems = load_problems(args, task, rounds=True)  # a run stopped early covers every template
    target, draft, tokenizer = load_pair(args, task)
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    config = MiningConfig(args.max_new_tokens, not args.no_early_stop, not args.no_cache_reuse,
                          args.speculation_depth, args.skip_unlikely)
    prompts = [(problem_id(pr.question), task.prompt_ids(tokenizer, pr.question), pr.to_json()) for pr in problems]
    if args.on_policy is not None:
        miner = on_policy_miner(args, target, draft, task, decode)
        stats = mine_prompts(miner, prompts, args.out, max_minutes=args.max_minutes)
        if world()[0] == 0:
            print(f"labelled {stats['labels']} judged acceptances of {stats['prompts']} prompts, "
                  f"{stats['unimportant_share']:.0%} unimportant", file=sys.stderr)
        return 0
    regenerator = None
    if args.regenerator == "trtllm":
        if args.target in EMBEDDED_TARGETS:
            raise SystemExit("--regenerator trtllm loads the target from a checkpoint folder: give --target PATH")
        from ..generation.regen_trtllm import TrtllmRegenerator

        regenerator = TrtllmRegenerator.from_checkpoint(args.target, args.trtllm_max_seq_len)
    try:
        if regenerator is None:
            regenerator = local_regenerator(args.regenerator, target, draft, args.batch_size, config.reuse_cache,
                                            parse_windows(args.lookup_windows))
        miner = make_miner(target, draft, task.checker, decode, config, args.batch_size, regenerator)
    except ValueError as e:
        raise SystemExit(f"mine: {e}") from None
    stats = mine_prompts(miner, prompts, args.out, max_minutes=args.max_minutes)
    if world()[0] == 0:
        print(f"mined {stats['labels']} labels from {stats['prompts']} prompts: {stats['labels_per_minute']:.1f} labels/min, "
              f"{stats['unimportant_share']:.0%} unimportant, {stats['wasted_share']:.0%} of target tokens wasted on "
              f"dropped speculative regenerations", file=sys.stderr)
        print(json.dumps({"out": args.out, **{k: round(v, 3) if isinstance(v, float) else v for k, v in stats.items()}},
                         indent=1), file=sys.stdout)
    return 0


def on_policy_miner(args: argparse.Namespace, target, draft, task, decode) -> OnPolicyMiner:
    """The on-policy miner of ``--on-policy JUDGE`` (refusing a judge made for other models)."""
    try:
        judge = JudgeHead.load(args.on_policy, draft_hidden=draft.hidden_size, target_hidden=target.hidden_size,
                               draft_model=draft.name, target_model=target.name, dtype=dtype_name(target.dtype))
        rule = JudgeRule.at_default(judge, args.on_policy_threshold)
    except (OSError, ValueError) as e:
        raise SystemExit(f"mine --on-policy {args.on_policy}: {e}") from None
    return OnPolicyMiner(target, draft, task.checker, decode, rule, DraftTree.chain(args.k), args.max_new_tokens,
                         dtype_name(target.dtype))
