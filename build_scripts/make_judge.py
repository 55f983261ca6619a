"""Reproduce a task's shipped judge of the embedded pair: mine -> features -> train -> install.

    python build_scripts/make_judge.py --work out/judge --variants-per-template 2 --max-new-tokens 200 \
        --ranks 2 --batch-size 6 --max-minutes 85        # the shipped gsm8k-cot judge (docs/results.md)

Every stage resumes: mining appends to WORK/labels.jsonl (rerun to continue), features and
training are recomputed from it. With --labels-archive (a gzip JSONL label set kept in the
repository, labels/README.md) the archive's records join WORK/labels.jsonl before mining (their
prompts are not mined again) and WORK/labels.jsonl is written back to it afterwards, so labels
outlive the work folder and each run adds to them; the archive must come from the same mining
settings (task, pair, --max-new-tokens, --seed). Each record keeps the dtype it was mined in (a
label is the target's answer with and without a swap: the dtype moves it only at near-ties), so
runs in another dtype may add to an archive. Mining uses the TRAINING templates only.
The judge is trained for each setup in --setups (validation ROC-AUC of each is printed and kept in WORK/summary.json); the
one with the best validation ROC-AUC is installed as the task's shipped judge (gsm8k-cot: trtllm_autojudge/assets/judge_gsm8k.safetensors,
gsm8k-program: .../judge_gsm8k_program.safetensors) unless --no-install; `--setups DT-DT1-DT2-LS` trains a
target-only judge (no DD blocks), which every engine route runs. The installed judge's default threshold is its
validation one: `trtllm-autojudge calibrate --out` the same file certifies one by answers changed (the gsm8k-program
judge: docs/notebook/certification.md). --target/--draft/--dtype pass to `mine` and `features` (default: the task's
embedded pair, in bf16 where the CPU has it).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from trtllm_autojudge.cli import main as cli  # noqa: E402
from trtllm_autojudge.judge.frontier import DEFAULT_MAX_IMPORTANT_ACCEPT  # noqa: E402
from trtllm_autojudge.judge.head import JudgeHead, parse_setup  # noqa: E402
from trtllm_autojudge.judge.train import SPLIT_UNITS  # noqa: E402
from trtllm_autojudge.mining.cli import problem_id  # noqa: E402
from trtllm_autojudge.mining.features import ALL_BLOCKS  # noqa: E402
from trtllm_autojudge.mining.run import DEFAULT_WINDOWS, LOCAL_REGENERATORS  # noqa: E402
from trtllm_autojudge.mining.store import append_record, read_records, repair_tail, write_gzip  # noqa: E402
from trtllm_autojudge.models.dtype import CHOICES  # noqa: E402
from trtllm_autojudge.tasks import add_task_args, task_from_args  # noqa: E402


def labels_path(args) -> Path:
    return args.work / "labels.jsonl"


def mine(args) -> None:
    verb = ["mine", "--task", args.task, *models(args), "--out", str(labels_path(args)), "--split", "train",
            "--no-originals",
            "--variants-per-template", str(args.variants_per_template), "--max-new-tokens", str(args.max_new_tokens),
            "--seed", str(args.seed), "--batch-size", str(args.batch_size),
            "--speculation-depth", str(args.speculation_depth), "--skip-unlikely", str(args.skip_unlikely),
            "--regenerator", args.regenerator, "--lookup-windows", args.lookup_windows]
    if args.max_minutes is not None:
        verb += ["--max-minutes", str(args.max_minutes)]
    if args.ranks > 1:
        mpirun = shutil.which("mpirun", path=os.path.dirname(sys.executable)) or "mpirun"
        flags = ["--allow-run-as-root"] if os.geteuid() == 0 else []
        if (os.cpu_count() or 1) < args.ranks:
            flags.append("--oversubscribe")
        cmd = [mpirun, *flags, "-n", str(args.ranks), sys.executable, "-m", "trtllm_autojudge.cli", *verb, "--threads", "1"]
        subprocess.run(cmd, check=True)
    elif cli(verb) != 0:
        raise SystemExit("mining failed")


def feature_blocks(setups: str) -> str:
    """The blocks to extract: all four of the paper (DD, DT, TD, TT), then the lookahead ones that ``setups`` name."""
    blocks = parse_setup(ALL_BLOCKS)
    for setup in setups.split(","):
        blocks += [b for b in parse_setup(setup) if b not in blocks]
    return "-".join(blocks)


def seed_from_archive(labels: Path, archive: Path) -> None:
    """Append the archive's records that ``labels`` lacks (mining skips the prompts it holds)."""
    if not archive.exists():
        return
    repair_tail(labels)
    have = {str(r["id"]) for r in read_records(labels)[0]}
    added = [r for r in read_records(archive)[0] if str(r["id"]) not in have]
    for rec in added:
        append_record(labels, rec)
    print(f"{archive}: {len(added)} prompts' labels added to {labels}")


def add_templates(labels: Path, task, per_template: int, seed: int) -> None:
    """Give every record of ``labels`` its template (``mine`` writes it; records mined before it did
    lack it): the questions this script mines are drawn again and matched by id."""
    records = read_records(labels)[0]
    if all(r.get("template") is not None for r in records):
        return
    template = {problem_id(q.question): q.template_id for q in task.problems("train", False, per_template, seed)}
    if all(t is None for t in template.values()):  # a task without templates: nothing to add
        return
    missing = [r for r in records if r.get("template") is None and str(r["id"]) not in template]
    if missing:
        raise SystemExit(f"{labels}: {len(missing)} records (first id {missing[0]['id']}) are no question of "
                         f"--variants-per-template {per_template} --seed {seed}: the archive needs the same settings")
    tmp = labels.with_suffix(".tmp")
    tmp.unlink(missing_ok=True)
    for r in records:
        append_record(tmp, {**r, "template": template[str(r["id"])] if r.get("template") is None else r["template"]})
    tmp.replace(labels)
    print(f"{labels}: the template of {sum(r.get('template') is None for r in records)} older records added")


def models(args) -> list[str]:
    return ["--target", args.target, "--draft", args.draft, "--dtype", args.dtype] + (
        ["--threads", str(args.threads)] if args.threads and args.ranks == 1 else [])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--work", type=Path, default=Path("out/judge"))
    p.add_argument("--variants-per-template", type=int, default=2)
    p.add_argument("--max-new-tokens", type=int, default=200)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--ranks", type=int, default=1, help="MPI ranks for mining (mpirun -n RANKS)")
    p.add_argument("--batch-size", type=int, default=1, help="prompts mined together per rank")
    p.add_argument("--speculation-depth", type=int, default=8,
                   help="regenerations in flight per prompt (1: the plain loop; docs/mining.md)")
    p.add_argument("--regenerator", choices=LOCAL_REGENERATORS, default="transformers",
                   help="mining's regeneration backend (lookup: batched with --batch-size > 1; lookup-draft: "
                        "one prompt at a time per rank, --batch-size 1; docs/mining.md)")
    p.add_argument("--lookup-windows", default=DEFAULT_WINDOWS, metavar="MIN:MAX", help="window sizes of the lookup regenerators")
    p.add_argument("--skip-unlikely", type=float, default=0.0, metavar="P",
                   help="research-code shortcut that changes labels (default off; docs/mining.md)")
    p.add_argument("--max-minutes", type=float, default=None, help="mining time budget (rerun to continue)")
    p.add_argument("--labels-archive", type=Path, default=None, metavar="PATH.jsonl.gz",
                   help="label set kept in the repository: merged in before mining, written back after (module docstring)")
    p.add_argument("--setups", default="DD-DT,DT", help="judge setups to train; the one with the best validation ROC-AUC is installed")
    p.add_argument("--val-fraction", type=float, default=0.2,
                   help="fraction of prompts held out for the C grid and the threshold (default 0.2)")
    p.add_argument("--split-by", choices=SPLIT_UNITS, default="prompt",
                   help="the judges' validation split unit (`train --split-by`; default prompt)")
    p.add_argument("--max-important-accept", type=float, default=DEFAULT_MAX_IMPORTANT_ACCEPT,
                   help="the judges' default threshold: the largest whose validation important-accept rate is at "
                        f"most this (`train --max-important-accept`; default {DEFAULT_MAX_IMPORTANT_ACCEPT})")
    p.add_argument("--no-install", action="store_true")
    p.add_argument("--force", action="store_true",
                   help="install over a shipped judge that has a certificate (the judge made here has none until "
                        "`calibrate` certifies it)")
    p.add_argument("--target", default="tuned", help="target for mine/features (default: the embedded tuned target)")
    p.add_argument("--draft", default="embedded", help="draft for mine/features (default: the embedded draft)")
    p.add_argument("--dtype", default="auto", choices=CHOICES, help="compute dtype of mine/features (default auto)")
    p.add_argument("--threads", type=int, default=None, help="torch threads of mine/features (ranks > 1: 1 each)")
    add_task_args(p)
    args = p.parse_args(argv)
    task = task_from_args(args)
    installed = task.shipped_judge_path()
    if installed is None and not args.no_install:
        raise SystemExit(f"task {task.name} has no shipped judge to install: pass --no-install")
    if not args.no_install and not args.force and installed.is_file() and "certificate" in JudgeHead.load(installed).meta:
        raise SystemExit(f"{installed} is a certified judge and the one made here would have no certificate: pass "
                         f"--no-install (then `trtllm-autojudge calibrate --out` certifies it), or --force to replace it "
                         f"with an uncertified judge")
    if args.labels_archive is not None and args.labels_archive.suffix != ".gz":
        raise SystemExit(f"--labels-archive {args.labels_archive}: name a gzip file (PATH.jsonl.gz)")
    args.work.mkdir(parents=True, exist_ok=True)
    labels = labels_path(args)
    if args.labels_archive is not None:
        seed_from_archive(labels, args.labels_archive)
    mine(args)
    add_templates(labels, task, args.variants_per_template, args.seed)
    if args.labels_archive is not None:
        records = read_records(labels)[0]
        write_gzip(args.labels_archive, records)
        print(f"{args.labels_archive}: {len(records)} prompts' labels")
    features = args.work / "features.safetensors"
    if cli(["features", "--task", args.task, *models(args), "--labels", str(labels), "--setup", feature_blocks(args.setups),
            "--out", str(features)]) != 0:
        raise SystemExit("feature extraction failed")
    summary = {}
    for setup in args.setups.split(","):
        out = args.work / f"judge_{setup}.safetensors"
        if cli(["train", "--features", str(features), "--setup", setup, "--out", str(out),
                "--seed", str(args.seed), "--val-fraction", str(args.val_fraction), "--split-by", args.split_by,
                "--max-important-accept", str(args.max_important_accept), "--plot", str(args.work / f"frontier_{setup}.png")]) != 0:
            raise SystemExit(f"training {setup} failed")
        head = JudgeHead.load(out)
        head.meta["settings"] = {"split": "train", "per_template": args.variants_per_template, "seed": args.seed}
        head.save(out)  # the mined questions, so that held-out sets leave them out (Task.trained_questions)
        summary[setup] = {"threshold": head.threshold, **head.meta.get("metrics", {})}
    (args.work / "summary.json").write_text(json.dumps(summary, indent=1, default=str))
    for setup, m in summary.items():
        print(f"{setup:<8} validation ROC-AUC {m.get('val_roc_auc', float('nan')):.3f}  threshold {m['threshold']:.3g}")
    if not args.no_install:
        setup = max(summary, key=lambda setup: summary[setup].get("val_roc_auc", float("-inf")))
        shutil.copyfile(args.work / f"judge_{setup}.safetensors", installed)
        print(f"installed the {setup} judge (best validation ROC-AUC) as {installed}; certify its threshold with "
              f"`trtllm-autojudge calibrate --task {task.name} --judge {installed} --questions CALIB.jsonl "
              f"--out {installed}`")
    return 0


if __name__ == "__main__":
    sys.exit(main())
