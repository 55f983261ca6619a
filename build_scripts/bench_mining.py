"""Mining throughput: today's miner and the fast ones, side by side on the same prompts.

    python build_scripts/bench_mining.py --task gsm8k-program --limit 16 --batch-size 4 --depth 1 \
        --max-new-tokens 320 --threads 2 --miners plain,lookup,lookup-batched --ranks 2 --no-bf16

Mines the first --limit training-template variants of the embedded pair (as the shipped judge's
labels were mined) with the --miners named (default: all):
- plain: today's miner (:class:`LabelMiner`: one prompt at a time, one regeneration at a time, KV
  prefix reuse, early stop);
- fast: speculative regeneration (depth --depth) over --batch-size prompts at once on the batched
  transformers backend;
- lookup: one prompt at a time on the lookup regenerator (windows of the sequence each
  regeneration branched from, verified per target forward; :mod:`trtllm_autojudge.mining.lookup`);
- lookup-draft: the same, the draft proposing the windows a lookup cannot (``--regenerator lookup-draft``);
- lookup-batched: the fast miner on the batched backend, every row verifying its looked-up window
  (``--regenerator lookup --batch-size B``);
- fast-skip: fast with --skip-unlikely P (the research-code shortcut: changes labels);
then, unless --no-bf16, fast in bfloat16 (how often the dtype changes labels), and with --ranks R > 1
plain and the fastest exact miner run here, each under mpirun -n R (scaling, and the ratio at equal
ranks); all in one run, same dtype and threads, and writes --out (docs/results/mining.json).
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

from trtllm_autojudge.data.sources import add_problem_args, load_problems  # noqa: E402
from trtllm_autojudge.mining.cli import problem_id  # noqa: E402
from trtllm_autojudge.mining.miner import MiningConfig  # noqa: E402
from trtllm_autojudge.mining.run import DEFAULT_WINDOWS, local_regenerator, make_miner, mine_prompts, parse_windows  # noqa: E402
from trtllm_autojudge.mining.store import read_records  # noqa: E402
from trtllm_autojudge.models.loading import add_model_args, load_pair  # noqa: E402
from trtllm_autojudge.tasks import add_task_args, task_from_args  # noqa: E402


MINERS = ("plain", "fast", "lookup", "lookup-draft", "lookup-batched", "fast-skip")


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


def mine_mpi(args, name: str, flags: list[str]) -> tuple[str, dict, dict]:
    """`mine` with miner `name`'s flags under mpirun -n --ranks, on the same cores: (command, stats, records)."""
    out = args.work / f"{name}-{args.ranks}ranks.jsonl"
    for stale in args.work.glob(out.name + "*"):
        stale.unlink()
    mpirun = shutil.which("mpirun", path=os.path.dirname(sys.executable)) or "mpirun"
    mpi_flags = (["--allow-run-as-root"] if os.geteuid() == 0 else []) + ["--oversubscribe"]
    cmd = [mpirun, *mpi_flags, "-n", str(args.ranks), sys.executable, "-m", "trtllm_autojudge.cli", "mine",
           "--task", args.task, "--dtype", args.dtype, "--out", str(out), "--split", args.split, "--no-originals",
           "--variants-per-template", str(args.variants_per_template), "--seed", str(args.seed),
           "--limit", str(args.limit), "--max-new-tokens", str(args.max_new_tokens), *flags,
           "--threads", str(max(1, (args.threads or 1) // args.ranks))]  # the same cores in all
    done = subprocess.run(cmd, check=True, capture_output=True, text=True, cwd=REPO)
    shown = " ".join(["mpirun", "-n", str(args.ranks), "python", *cmd[cmd.index("-m"):]])  # no paths of this machine
    return shown, json.loads(done.stdout[done.stdout.index("{"):]), {r["id"]: r for r in read_records(out)[0]}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--max-new-tokens", type=int, default=200)
    p.add_argument("--depth", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=6, help="prompts per batch of the fast miner")
    p.add_argument("--skip-unlikely", type=float, default=0.01)
    p.add_argument("--ranks", type=int, default=2, help="MPI ranks of the scaling runs of plain and of the fastest exact miner (1: skip them)")
    p.add_argument("--miners", default=",".join(MINERS), help=f"miners to run, plain among them (default {','.join(MINERS)})")
    p.add_argument("--lookup-windows", default=DEFAULT_WINDOWS, metavar="MIN:MAX", help="window sizes of the lookup miners (mine's flag)")
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
               for pr in load_problems(args, task, rounds=True)]  # as `mine` orders them
    exact = MiningConfig(args.max_new_tokens, depth=args.depth)
    miners = args.miners.split(",")
    unknown = sorted(set(miners) - set(MINERS))
    if unknown or "plain" not in miners:
        raise SystemExit(f"--miners: choose among {','.join(MINERS)} and include plain (got {args.miners})")
    # the `mine` flags of each miner; the exact ones mine the plain loop's labels
    windows = ["--lookup-windows", args.lookup_windows]
    flags = {"plain": ["--batch-size", "1", "--speculation-depth", "1"],
             "fast": ["--batch-size", str(args.batch_size), "--speculation-depth", str(args.depth)],
             "lookup": ["--regenerator", "lookup", "--batch-size", "1", *windows],
             "lookup-draft": ["--regenerator", "lookup-draft", "--batch-size", "1", *windows],
             "lookup-batched": ["--regenerator", "lookup", "--batch-size", str(args.batch_size),
                                "--speculation-depth", str(args.depth), *windows],
             "fast-skip": ["--batch-size", str(args.batch_size), "--speculation-depth", str(args.depth),
                           "--skip-unlikely", str(args.skip_unlikely)]}
    results, records = {}, {}
    key = lambda name: name.replace("-", "_")  # noqa: E731  (result keys)
    for name in miners:
        batch = args.batch_size if name in ("fast", "lookup-batched", "fast-skip") else 1
        regenerator = None
        if name.startswith("lookup"):
            regenerator = local_regenerator(name.removesuffix("-batched"), target, draft, batch,
                                            windows=parse_windows(args.lookup_windows))
        config = MiningConfig(args.max_new_tokens, depth=args.depth, skip_unlikely=args.skip_unlikely) \
            if name == "fast-skip" else MiningConfig(args.max_new_tokens) if name == "plain" else exact
        stats, records[name] = run(name, make_miner(target, draft, checker, decode, config, batch, regenerator),
                                   prompts, args.work)
        results[key(name)] = rate(stats) | {"flags": " ".join(flags[name])}
        if name == "fast-skip":  # changes labels: compared with an exact miner's
            results[key(name)]["vs_exact"] = compare(records[name], records.get("fast", records["plain"]))
        elif name != "plain":
            results[key(name)]["vs_plain"] = compare(records[name], records["plain"])
        if name == "lookup-draft":
            results[key(name)]["regenerator_draft_tokens"] = regenerator.draft_forwarded
    if not args.no_bf16:
        target.model.to(torch.bfloat16)
        draft.model.to(torch.bfloat16)
        bf16, bf16_recs = run("fast-bf16", make_miner(target, draft, checker, decode, exact, args.batch_size), prompts, args.work)
        results["fast_bfloat16"] = rate(bf16) | {"vs_float32": compare(bf16_recs, records.get("fast", records["plain"]))}
        target.model.to(torch.float32)
        draft.model.to(torch.float32)
    exact_names = [n for n in miners if n not in ("plain", "fast-skip")]
    best = max(exact_names, key=lambda n: results[key(n)]["labels_per_cpu_minute"], default=None)
    cmd_mpi = None
    if args.ranks > 1 and best is not None:
        for name in ("plain", best):  # the same ranks for both: the equal-ranks ratio
            cmd_mpi, mpi, mpi_recs = mine_mpi(args, name, flags[name])
            one = results[key(name)]
            print(f"{name} x{args.ranks} ranks {mpi['labels']:5d} labels  {mpi['labels_per_minute']:7.1f} "
                  f"labels/min  {mpi['labels_per_cpu_minute']:7.1f} labels/CPU-min", flush=True)
            results[f"{key(name)}_{args.ranks}_ranks"] = rate(mpi) | {
                "vs_one_rank": compare(mpi_recs, records[name]),
                "scaling": round(mpi["labels_per_minute"] / one["labels_per_minute"], 3),
                "cpu_time_scaling": round(mpi["labels_per_cpu_minute"] / one["labels_per_cpu_minute"], 3),
                "command": cmd_mpi}
    plain = results["plain"]
    summary = {
        "labels_per_min_plain": round(plain["labels_per_minute"], 2),
        "fast_miner": best,  # the fastest exact miner of this run (labels_per_min_fast is its rate)
        "labels_per_min_fast": None if best is None else round(results[key(best)]["labels_per_minute"], 2),
        "labels_identical": None if best is None else results[key(best)]["vs_plain"]["prompts_identical"] == len(prompts),
    }
    for name in exact_names:  # every exact miner against plain, per minute of wall clock and of CPU time
        r, k = results[key(name)], key(name)
        summary |= {f"speedup_{k}": round(r["labels_per_minute"] / plain["labels_per_minute"], 2),
                    f"speedup_{k}_cpu_time": round(r["labels_per_cpu_minute"] / plain["labels_per_cpu_minute"], 2),
                    f"labels_identical_{k}": r["vs_plain"]["prompts_identical"] == len(prompts),
                    f"target_tokens_per_label_{k}": round(r["target_tokens_per_label"], 1),
                    f"wasted_share_{k}": round(r["wasted_share"], 4)}
    if args.ranks > 1 and best is not None:
        r = lambda name: results[f"{key(name)}_{args.ranks}_ranks"]  # noqa: E731
        summary |= {f"speedup_{key(best)}_{args.ranks}_ranks": round(
                        r(best)["labels_per_minute"] / r("plain")["labels_per_minute"], 2),
                    f"speedup_{key(best)}_{args.ranks}_ranks_cpu_time": round(
                        r(best)["labels_per_cpu_minute"] / r("plain")["labels_per_cpu_minute"], 2)}
    summary |= {
        "target_tokens_per_label_plain": round(plain["target_tokens_per_label"], 1),
        "dtype": str(next(target.model.parameters()).dtype).removeprefix("torch."),
        "threads": torch.get_num_threads(),
        "command": "python build_scripts/bench_mining.py " + " ".join(argv if argv is not None else sys.argv[1:]),
        "mpi_command": cmd_mpi,  # the fast miner's (plain's: results["plain_R_ranks"]["command"])
        "machine": args.machine,
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(summary | results, indent=1) + "\n")
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
