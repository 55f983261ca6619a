"""Mining throughput: today's miner and the fast one, side by side on the same prompts.

    nice -n 10 python build_scripts/bench_mining.py --limit 6 --max-new-tokens 200 --threads 1

Mines the first --limit training-template variants of the embedded pair (as the shipped judge's
labels were mined) with
- plain: today's miner (:class:`LabelMiner`: one prompt at a time, one regeneration at a time, KV
  prefix reuse, early stop);
- fast: speculative regeneration (depth --depth) over --batch-size prompts at once on the batched
  transformers backend;
- lookup: one prompt at a time on the lookup regenerator (windows of the sequence each
  regeneration branched from, verified per target forward; :mod:`trtllm_autojudge.mining.lookup`);
- lookup-draft: the same, the draft proposing the windows a lookup cannot (``--regenerator lookup-draft``);
- fast with --skip-unlikely P (the research-code shortcut: changes labels);
- fast in bfloat16 (how often the dtype changes labels);
- fast under mpirun -n --ranks (scaling);
all in one run, same dtype and threads, and writes --out (docs/results/mining.json).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from trtllm_autojudge.backends.loading import add_model_args, load_pair  # noqa: E402
from trtllm_autojudge.data.sources import add_problem_args, load_problems  # noqa: E402
from trtllm_autojudge.mining.cli import problem_id  # noqa: E402
from trtllm_autojudge.mining.miner import MiningConfig  # noqa: E402
from trtllm_autojudge.mining.run import local_regenerator, make_miner, mine_prompts  # noqa: E402
from trtllm_autojudge.mining.store import read_records  # noqa: E402
from trtllm_autojudge.tasks import add_task_args, task_from_args  # noqa: E402


def run(name, miner, prompts, work: Path) -> tuple[dict, dict]:
    out = work / f"{name}.jsonl"
    out.unlink(missing_ok=True)
    t0 = time.perf_counter()
    stats = mine_prompts(miner, prompts, out, progress=False)
    print(f"{name:<14} {stats['labels']:5d} labels  {stats['labels_per_minute']:7.1f} labels/min  "
          f"{stats['labels_per_cpu_minute']:7.1f} labels/CPU-min  "
          f"{stats['target_tokens_per_label']:6.1f} target tokens/label  {stats['wasted_share']:.1%} wasted  "
          f"({time.perf_counter() - t0:.0f} s)", flush=True)
    return stats, {r["id"]: r for r in read_records(out)[0]}


def compare(a: dict, b: dict) -> dict:
    """Prompts with identical labels, and labels of `a` whose (position, label) `b` does not have."""
    same = sum(a[k]["labels"] == b[k]["labels"] for k in a)
    differ = 0
    for k in a:
        theirs = {(lab[0], lab[1]) for lab in b[k]["labels"]}
        differ += sum((lab[0], lab[1]) not in theirs for lab in a[k]["labels"])
    first_token = []  # where the two responses part (the first label both can differ from)
    for k in a:
        ra, rb = a[k]["response_ids"], b[k]["response_ids"]
        first_token.append(next((j for j, (x, y) in enumerate(zip(ra, rb)) if x != y), None))
    return {"prompts_identical": same, "prompts": len(a), "labels": sum(len(r["labels"]) for r in a.values()),
            "labels_not_in_other": differ, "responses_differ_at": first_token}


def rate(stats: dict) -> dict:
    keep = ("prompts", "labels", "important", "seconds", "cpu_seconds", "labels_per_minute", "labels_per_cpu_minute",
            "unimportant_share",
            "target_tokens_per_label", "wasted_share", "regenerations", "wasted_regenerations", "skipped_unlikely")
    return {k: round(stats[k], 4) if isinstance(stats[k], float) else stats[k] for k in keep}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--max-new-tokens", type=int, default=200)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=6, help="prompts per batch of the fast miner")
    p.add_argument("--skip-unlikely", type=float, default=0.01)
    p.add_argument("--ranks", type=int, default=2, help="MPI ranks of the scaling run (1: skip it)")
    p.add_argument("--no-bf16", action="store_true", help="skip the bfloat16 run")
    p.add_argument("--work", type=Path, default=Path("out/bench_mining"))
    p.add_argument("--out", type=Path, default=REPO / "docs" / "results" / "mining.json")
    p.add_argument("--machine", default="2 CPU cores shared with other engineers' jobs and a training job",
                   help="what else ran on the machine (recorded in --out)")
    add_task_args(p)
    add_model_args(p)
    add_problem_args(p, split="train", variants=1)
    args = p.parse_args(argv)
    args.originals = False
    args.limit = args.limit or 6
    args.work.mkdir(parents=True, exist_ok=True)
    task = task_from_args(args)
    target, draft, tokenizer = load_pair(args, task)
    checker = task.checker
    decode = lambda ids: tokenizer.decode(ids, skip_special_tokens=True)  # noqa: E731
    prompts = [(problem_id(pr.question), task.prompt_ids(tokenizer, pr.question), pr.to_json())
               for pr in load_problems(args, task)]
    exact = MiningConfig(args.max_new_tokens, depth=args.depth)
    results = {}
    plain, plain_recs = run("plain", make_miner(target, draft, checker, decode, MiningConfig(args.max_new_tokens)),
                            prompts, args.work)
    fast, fast_recs = run("fast", make_miner(target, draft, checker, decode, exact, args.batch_size), prompts, args.work)
    results["plain"], results["fast"] = rate(plain), rate(fast)
    results["fast_vs_plain"] = compare(fast_recs, plain_recs)
    lookup, lookup_recs = run("lookup", make_miner(target, draft, checker, decode, exact, 1,
                                                   local_regenerator("lookup", target, draft)), prompts, args.work)
    results["lookup"] = rate(lookup) | {"vs_plain": compare(lookup_recs, plain_recs)}
    drafted = local_regenerator("lookup-draft", target, draft)
    lookup_draft, lookup_draft_recs = run("lookup-draft", make_miner(target, draft, checker, decode, exact, 1, drafted),
                                          prompts, args.work)
    results["lookup_draft"] = rate(lookup_draft) | {"vs_plain": compare(lookup_draft_recs, plain_recs),
                                                    "regenerator_draft_tokens": drafted.draft_forwarded}
    skip_cfg = MiningConfig(args.max_new_tokens, depth=args.depth, skip_unlikely=args.skip_unlikely)
    skip, skip_recs = run("fast+skip", make_miner(target, draft, checker, decode, skip_cfg, args.batch_size), prompts, args.work)
    results["fast_skip_unlikely"] = rate(skip) | {"p": args.skip_unlikely, "vs_exact": compare(skip_recs, fast_recs),
                                                  "speedup_vs_fast": round(skip["labels_per_minute"] / fast["labels_per_minute"], 3)}
    if not args.no_bf16:
        target.model.to(torch.bfloat16)
        draft.model.to(torch.bfloat16)
        bf16, bf16_recs = run("fast-bf16", make_miner(target, draft, checker, decode, exact, args.batch_size), prompts, args.work)
        results["fast_bfloat16"] = rate(bf16) | {"vs_float32": compare(bf16_recs, fast_recs)}
        target.model.to(torch.float32)
        draft.model.to(torch.float32)
    cmd_mpi = None
    if args.ranks > 1:
        out = args.work / f"fast-{args.ranks}ranks.jsonl"
        for stale in args.work.glob(out.name + "*"):
            stale.unlink()
        mpirun = shutil.which("mpirun", path=os.path.dirname(sys.executable)) or "mpirun"
        flags = (["--allow-run-as-root"] if os.geteuid() == 0 else []) + ["--oversubscribe"]
        cmd_mpi = [mpirun, *flags, "-n", str(args.ranks), sys.executable, "-m", "trtllm_autojudge.cli", "mine",
                   "--out", str(out), "--split", args.split, "--no-originals", "--variants-per-template",
                   str(args.variants_per_template), "--seed", str(args.seed), "--limit", str(args.limit),
                   "--max-new-tokens", str(args.max_new_tokens), "--speculation-depth", str(args.depth),
                   "--batch-size", str(args.batch_size), "--threads", str(args.threads or 1)]
        done = subprocess.run(cmd_mpi, check=True, capture_output=True, text=True, cwd=REPO)
        mpi = json.loads(done.stdout[done.stdout.index("{"):])
        mpi_recs = {r["id"]: r for r in read_records(out)[0]}
        print(f"fast x{args.ranks} ranks {mpi['labels']:5d} labels  {mpi['labels_per_minute']:7.1f} labels/min  "
              f"{mpi['labels_per_cpu_minute']:7.1f} labels/CPU-min", flush=True)
        results[f"fast_{args.ranks}_ranks"] = rate(mpi) | {"vs_one_rank": compare(mpi_recs, fast_recs),
                                                           "scaling": round(mpi["labels_per_minute"] / fast["labels_per_minute"], 3),
                                                           "cpu_time_scaling": round(mpi["labels_per_cpu_minute"] / fast["labels_per_cpu_minute"], 3)}
    summary = {
        "labels_per_min_plain": round(plain["labels_per_minute"], 2),
        "labels_per_min_fast": round(fast["labels_per_minute"], 2),
        "speedup": round(fast["labels_per_minute"] / plain["labels_per_minute"], 2),
        # the machine is shared: per minute of the miner's own CPU time is the steadier comparison
        "labels_per_cpu_min_plain": round(plain["labels_per_cpu_minute"], 2),
        "labels_per_cpu_min_fast": round(fast["labels_per_cpu_minute"], 2),
        "speedup_cpu_time": round(fast["labels_per_cpu_minute"] / plain["labels_per_cpu_minute"], 2),
        "labels_per_cpu_min_lookup": round(lookup["labels_per_cpu_minute"], 2),
        "speedup_lookup_cpu_time": round(lookup["labels_per_cpu_minute"] / plain["labels_per_cpu_minute"], 2),
        "labels_per_cpu_min_lookup_draft": round(lookup_draft["labels_per_cpu_minute"], 2),
        "speedup_lookup_draft_cpu_time": round(lookup_draft["labels_per_cpu_minute"] / plain["labels_per_cpu_minute"], 2),
        "labels_identical": results["fast_vs_plain"]["prompts_identical"] == len(prompts),
        "labels_identical_lookup": results["lookup"]["vs_plain"]["prompts_identical"] == len(prompts),
        "labels_identical_lookup_draft": results["lookup_draft"]["vs_plain"]["prompts_identical"] == len(prompts),
        "target_tokens_per_label_plain": round(plain["target_tokens_per_label"], 1),
        "target_tokens_per_label_fast": round(fast["target_tokens_per_label"], 1),
        "target_tokens_per_label_lookup": round(lookup["target_tokens_per_label"], 1),
        "target_tokens_per_label_lookup_draft": round(lookup_draft["target_tokens_per_label"], 1),
        "wasted_share_fast": round(fast["wasted_share"], 4),
        "dtype": str(next(target.model.parameters()).dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "command": "nice -n 10 python build_scripts/bench_mining.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "mpi_command": None if cmd_mpi is None else " ".join(["mpirun", "-n", str(args.ranks), "python", *cmd_mpi[cmd_mpi.index("-m"):]]),
        "machine": args.machine,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary | results, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
