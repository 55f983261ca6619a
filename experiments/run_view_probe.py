#!/usr/bin/env python3
"""Would a judge of the whole accepted run rank the rule's mismatches better than the task's judge?
Backs notebook/long-windows.md, "A judge of the whole run: the target's view at the end of the
minimum run".

Under a minimum run of M, the judge is asked only about a mismatch whose first M - 1 draft children
are the target's own greedy tokens, so the verify pass that decides it already holds the target's
hidden states and logits at every node of that run. The task's judge reads two of them (DT1, DT2)
and their logits (LS). This probe asks whether the rest of the run says more: for each mined label
the draft continues the swapped-in token greedily for ``--steps`` tokens, as it would in a window,
and the target runs over them (the lookahead pass of ``mining/features.py``, longer). Blocks:

  DT-DT1-DT2-LS  the task's judge's blocks (as ``features`` computes them)
  DTR            the target's hidden state at node M - 1, the last node of a minimum run of M
  DTM            the mean of the target's hidden states over the run's M nodes
  HES            per node of the run: the target's entropy, its top-1 minus top-2 log-probability
                 and its log-probability of the draft's next token (3 M values)
  PAR            at the mismatch's parent: the target's log-probability of its own token and of
                 the draft's, and its entropy (the view ``--min-target-prob`` gates on)

``run`` is the number of tokens the mismatch opens within the steps computed (itself and the exact
matches below it). A probe of each setup is fitted as ``train`` fits (scaled logistic regression,
C by validation ROC-AUC; ``trtllm_autojudge.judge.probe``), on all labels or on those with
``run >= M`` only, and scored on the held-out labels with ``run >= M``: the mismatches the rule asks
about. Each fit is then compared with the first setup's, paired by split (``paired``). ``--split prompt`` holds out new variants of seen templates, as the calibration and report
sets are. Features are written per chunk of records under ``--work`` and a rerun resumes (under the
same labels, steps, minimum run, models and dtype, which the folder's ``setup.json`` records).

    python experiments/run_view_probe.py --task gsm8k-program --threads 2 --min-run 8 \\
        --labels labels/gsm8k-program_train-v24-seed7_draft30.jsonl.gz --work out/run_view \\
        --out docs/results/run_view_probe_program.json
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from scipy import stats
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.judge.lookahead import MIN_LOG_PROB, lookahead_scores  # noqa: E402
from trtllm_autojudge.judge.probe import TAIL, fit_probe, over_seeds, seed_lines, write_result  # noqa: E402
from trtllm_autojudge.judge.train import SPLIT_UNITS, split_by_group  # noqa: E402
from trtllm_autojudge.mining.features import after_prefixes  # noqa: E402
from trtllm_autojudge.mining.store import read_records  # noqa: E402
from trtllm_autojudge.models.dtype import dtype_name, resolve_dtype  # noqa: E402
from trtllm_autojudge.models.loading import add_model_args, load_pair  # noqa: E402
from trtllm_autojudge.tasks import add_task_args, task_from_args  # noqa: E402

BLOCKS = ("DT", "DT1", "DT2", "LS", "DTR", "DTM", "HES", "PAR")
SETUPS = "DT-DT1-DT2-LS,DT-DT1-DT2-LS-PAR,DT-DT1-DT2-LS-HES,DT-DT1-DT2-LS-DTR,DT-DT1-DT2-LS-DTM,DT-DT1-DT2-LS-DTR-DTM-HES-PAR"


def log_softmax_stats(logits: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:  # [..., V]
    """(log-probabilities [..., V], entropy [...], top-1 minus top-2 log-probability [...])."""
    logp = torch.log_softmax(logits.float(), dim=-1)
    entropy = -(logp.exp() * logp).sum(-1)
    top2 = logp.topk(2, dim=-1).values
    return logp, entropy, top2[..., 0] - top2[..., 1]


def record_blocks(target, draft, record: dict, steps: int, min_run: int) -> dict[str, np.ndarray]:
    """Every block of :data:`BLOCKS` ([L, width] each) and ``run`` ([L]) for one record's L labels."""
    seq, labels = record["final_ids"], record["labels"]
    positions = [int(lab[0]) for lab in labels]
    target_tokens, draft_tokens = [int(lab[2]) for lab in labels], [int(lab[3]) for lab in labels]
    end = max(positions) + 1
    d_sess = draft.session()
    d_sess.forward(seq[:end])
    _, _, fed = after_prefixes(d_sess, end, positions, [draft_tokens], greedy_steps=steps)  # fed [S+1, L]
    t_sess = target.session()
    parent_logits = t_sess.forward(seq[:end]).logits[[p - 1 for p in positions]]  # [L, V]
    t_hidden, t_logits, _ = after_prefixes(t_sess, end, positions, [row.tolist() for row in fed])  # [S+1, L, Ht], [S+1, L, V]
    L = len(labels)
    logp, entropy, margin = log_softmax_stats(t_logits[:steps])  # [S, L, V], [S, L], [S, L]
    next_logp = logp.gather(-1, fed[1:steps + 1, :, None]).squeeze(-1).clamp(min=MIN_LOG_PROB)  # [S, L]
    exact = (t_logits[:steps].argmax(-1) == fed[1:steps + 1])  # [S, L]: child k+1 is the target's greedy token
    run = 1 + torch.cumprod(exact.long(), dim=0).sum(0)  # [L]
    p_logp, p_entropy, _ = log_softmax_stats(parent_logits)  # [L, V], [L]
    rows = torch.arange(L)
    par = torch.stack([p_logp[rows, torch.tensor(target_tokens)], p_logp[rows, torch.tensor(draft_tokens)].clamp(min=MIN_LOG_PROB),
                       p_entropy], dim=1)  # [L, 3]
    m = min_run
    out = {"DT": t_hidden[0], "DT1": t_hidden[1], "DT2": t_hidden[2],
           "LS": lookahead_scores(t_logits[:2].flatten(0, 1), rows, L + rows, fed[1], fed[2]),
           "DTR": t_hidden[m - 1], "DTM": t_hidden[:m].mean(0),
           "HES": torch.cat([entropy[:m].T, margin[:m].T, next_logp[:m].T], dim=1), "PAR": par}
    blocks = {b: out[b].float().numpy() for b in BLOCKS}
    return blocks | {"run": run.numpy()}


def work_setup(args) -> dict:
    """What the features under ``--work`` depend on: a resume under another setup is refused."""
    return {"labels": [str(path) for path in args.labels], "steps": args.steps, "min_run": args.min_run,
            "chunk": args.chunk, "target": args.target, "draft": args.draft,
            "dtype": dtype_name(resolve_dtype(args.dtype, args.device))}


def check_work(args) -> dict:
    """The work folder's setup, written on first use; refuses a folder made under another one."""
    args.work.mkdir(parents=True, exist_ok=True)
    path, setup = args.work / "setup.json", work_setup(args)
    if path.exists():
        made = json.loads(path.read_text())
        changed = {k: (made.get(k), v) for k, v in setup.items() if made.get(k) != v}
        if changed:
            raise SystemExit(f"{args.work} holds features made under another setup ({changed}: made, asked): "
                             f"give the same arguments, or another --work")
    else:
        path.write_text(json.dumps(setup, indent=1))
    return setup


def extract(args, records: list[dict]) -> None:
    """Write the blocks of every chunk of ``--chunk`` records not yet under ``--work``."""
    chunks = [(i, records[i:i + args.chunk]) for i in range(0, len(records), args.chunk)]
    todo = [(i, chunk) for i, chunk in chunks if not (args.work / f"chunk_{i:06d}.npz").exists()]
    if not todo:
        return
    target, draft, _ = load_pair(args, task_from_args(args))
    bar = tqdm(total=sum(len(c) for _, c in todo), desc="run view", unit="record", file=sys.stderr)
    with torch.inference_mode():
        for i, chunk in todo:
            parts = []
            for j, rec in enumerate(chunk):
                if rec["labels"]:
                    blocks = record_blocks(target, draft, rec, args.steps, args.min_run)
                    n = len(rec["labels"])
                    parts.append(blocks | {"label": np.array([int(lab[1]) for lab in rec["labels"]]),
                                           "prompt": np.full(n, i + j), "template": np.full(n, -1 if rec.get("template") is None else int(rec["template"]))})
                bar.update(1)
            merged = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}
            tmp = args.work / f"chunk_{i:06d}.tmp.npz"
            np.savez(tmp, **merged)
            tmp.rename(args.work / f"chunk_{i:06d}.npz")
    bar.close()


def load_work(work: Path) -> dict[str, np.ndarray]:
    files = sorted(work.glob("chunk_*[0-9].npz"))
    if not files:
        raise SystemExit(f"{work} holds no features: the label files gave no labels")
    parts = [dict(np.load(f)) for f in files]
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}


def probe(data: dict[str, np.ndarray], setups: list[str], min_run: int, seeds: list[int], cs: list[float],
          val_fraction: float, split: str = "template") -> dict:
    """Per setup and training population, mean validation ROC-AUC and left tail over the seeds, on
    the held-out labels whose run reaches ``min_run``; whole prompts or templates are held out."""
    if split not in SPLIT_UNITS:
        raise ValueError(f"split must be one of {SPLIT_UNITS}, got {split!r}")
    y, groups, asked = data["label"].astype(np.int64), data[split], data["run"] >= min_run
    result = {"labels": int(y.size), "harmful": int(y.sum()), "asked": int(asked.sum()), "split": split,
              "asked_harmful": int(y[asked].sum()), "min_run": min_run, "seeds": seeds, "setups": {}}
    print(f"{y.size} labels ({y.sum()} harmful); run >= {min_run}: {asked.sum()} ({y[asked].sum()} harmful)")
    print(f"{'setup':<40}{'trained on':<12}{'seed':>6}{'ROC-AUC':>9}  harmless accepted at "
          + " / ".join(f"{s:.1%}" for s in TAIL) + " of the harmful")
    for setup in tqdm(setups, desc="probes", unit="setup", file=sys.stderr):
        X = np.concatenate([data[b].reshape(y.size, -1) for b in setup.split("-")], axis=1)  # [N, F]
        runs = {}
        for seed in seeds:
            train, val = split_by_group(groups, val_fraction, seed, split)
            val &= asked
            runs[seed] = {name: fit_probe(X[part], y[part], X[val], y[val], cs)
                          for name, part in (("all", train), (f"run>={min_run}", train & asked))}
        result["setups"][setup] = over_seeds(runs)
        print("\n".join(seed_lines(f"{setup:<40}", result["setups"][setup], 12)))
    result["paired"] = paired(result["setups"], setups[0])
    for name, diff in result["paired"].items():
        print(f"{name:<60}" + "  ".join(f"{m} {d['mean']:+.3f} [{d['low']:+.3f}, {d['high']:+.3f}] ({d['wins']})"
                                        for m, d in diff.items()))
    return result


def paired(fits: dict, baseline: str) -> dict:
    """Each fit against ``baseline`` trained on the same population and on all labels, paired by split:
    ``{"SETUP@POP - BASELINE@POP": {metric: mean difference, its 95% t-interval over the splits and
    the splits it wins}}`` for the ROC-AUC and the harmless share at each share of :data:`TAIL`."""
    def metrics(fit: dict) -> dict[str, float]:
        return {"roc_auc": fit["val_roc_auc"], **{f"at_{t}": fit["harmless_accepted_at"][str(t)] for t in TAIL}}

    out = {}
    for setup, result in fits.items():
        seeds = list(result["per_seed"])
        for pop in result["mean"]:
            for base_pop in dict.fromkeys((pop, "all")):
                if (setup, pop) == (baseline, base_pop):
                    continue
                a = [metrics(result["per_seed"][s][pop]) for s in seeds]
                b = [metrics(fits[baseline]["per_seed"][s][base_pop]) for s in seeds]
                diff = {}
                for m in a[0]:
                    d = np.array([x[m] - y[m] for x, y in zip(a, b)])  # [seeds]
                    low, high = (stats.t.interval(0.95, d.size - 1, loc=d.mean(), scale=stats.sem(d)) if d.std() > 0
                                 else (d.mean(), d.mean()))  # the same difference on every split
                    diff[m] = {"mean": float(d.mean()), "low": float(low), "high": float(high), "wins": int((d > 0).sum())}
                out[f"{setup}@{pop} - {baseline}@{base_pop}"] = diff
    return out


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--labels", type=Path, required=True, action="append", help="mined label files (repeatable)")
    p.add_argument("--work", type=Path, required=True, help="folder of the per-chunk features (a rerun resumes)")
    p.add_argument("--min-run", type=int, default=8, help="the rule's minimum run M")
    p.add_argument("--steps", type=int, default=8, help="draft children computed after each mismatch (>= M)")
    p.add_argument("--chunk", type=int, default=50, help="records per feature file")
    p.add_argument("--setups", default=SETUPS, help=f"comma-separated setups of {'-'.join(BLOCKS)}")
    p.add_argument("--seeds", default="7,8,9")
    p.add_argument("--split", default="template", choices=SPLIT_UNITS,
                   help="hold out whole templates (new kinds of question) or prompts (new variants of seen templates)")
    p.add_argument("--val-fraction", type=float, default=0.2)
    p.add_argument("--cs", default="1e-4,3e-4,1e-3,3e-3,1e-2")
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    add_task_args(p)
    add_model_args(p)
    args = p.parse_args(argv)
    if not 2 <= args.min_run <= args.steps:
        raise SystemExit(f"--min-run {args.min_run} must lie in [2, --steps {args.steps}]")
    unknown = {b for s in args.setups.split(",") for b in s.split("-")} - set(BLOCKS)
    if unknown:
        raise SystemExit(f"--setups: unknown blocks {sorted(unknown)}; blocks are {', '.join(BLOCKS)}")
    setup = check_work(args)
    records = [rec for path in args.labels for rec in read_records(path)[0]]
    extract(args, records)
    result = probe(load_work(args.work), args.setups.split(","), args.min_run, [int(s) for s in args.seeds.split(",")],
                   [float(c) for c in args.cs.split(",")], args.val_fraction, args.split)
    write_result(args.out, result | {"work_setup": setup})
    return 0


if __name__ == "__main__":
    sys.exit(main())
