#!/usr/bin/env python3
"""Does the target's confidence over the tokens AFTER a judged acceptance tell harmful acceptances
from harmless ones? An on-policy probe over the runs of `calibrate` / `eval` output folders. Backs
notebook/certification.md, "A probe: the target's view after a judged acceptance" and "The judge's
own logit against the target's hesitation".

    python experiments/window_probe.py --runs out/cal_minrun8_calib3:judge@0.1 \\
        --runs out/cal_la_minrun4_calib3:judge@0.035 --runs out/report3_minrun8:judge \\
        --questions out/calib3.jsonl --questions out/report3.jsonl --out docs/results/window_probe_program.json

For every judge run that accepted a mismatch, one target forward over the question's prompt and the
run's response gives the target's logits at every position. Each judged acceptance (the draft token d
kept at position i where the target wanted t) gets: log p(t) and log p(d) at the swap, and over the
next W positions (the run the acceptance opened, and past it) the smallest top-1 - top-2 log-prob
margin and the mean and largest entropy, for each W of ``--windows``; then the same up to the end
of the line after the swap's line (the code line a comment's swap feeds). An acceptance is harmful
when it is the only one of a response whose answer changed against lossless, and harmless when its
response kept its answer; acceptances of changed responses with several are left out, as no one of
them is known to be the cause. Printed and written: each statistic's ROC-AUC as a score of harm
(low margins and target-token log-probs; high entropies and draft-token log-probs), and the share
of harmless acceptances a gate at each harmful acceptance's value would also stop. A response-level
view follows: each response's most alarming acceptance against whether its answer changed, over
every response with an acceptance. With ``--judge`` (a target-only judge), each acceptance also gets
the judge's own logit from the same forward (``judge_logit``, high alarms): the baseline the
statistics have to beat, since the judge already read it when it accepted. At threshold 1 (every
judgeable mismatch accepted) the judge had no say, so there its logit competes on equal terms.

A probe: no runtime reads these statistics. The judge at the swap cannot see them, so a gain here
would be a second gate after the judge, in the rule and the engine.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch
from sklearn.metrics import roc_auc_score
from tqdm.auto import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.judge.head import JudgeHead  # noqa: E402
from trtllm_autojudge.judge.lookahead import lookahead_scores  # noqa: E402
from trtllm_autojudge.mining.cli import problem_id  # noqa: E402
from trtllm_autojudge.mining.store import read_records  # noqa: E402
from trtllm_autojudge.tasks import load_task  # noqa: E402

# statistics whose LOW values flag harm: a hesitating target (small margins, little probability on
# its own token); entropies and the probability it gives the draft's token flag harm when HIGH
HARM_IF_LOW = ("margin", "lp_target_token")


def judge_logits(
    head,  # JudgeHead of target-only blocks (DT, DT1, DT2, LS)
    logits: torch.Tensor,  # [L, V]: the target's logits, row r predicting token r + 1 of the sequence
    hidden: torch.Tensor,  # [L, H]: the target's final-norm hidden state, row r with token r as the input
    seq: torch.Tensor,  # [L] int64: the sequence
    rows: list[int],  # [M]: the row with each acceptance's (draft) token as the input
) -> np.ndarray:  # [M] float64: the judge's logit; nan where the sequence ends before its lookahead
    """The judge's logit at each acceptance, the tokens after it read as the chain the verify pass
    ran: inside a minimum run of 3 or more they are the draft's exact matches, so they are its c1, c2."""
    L, out = len(seq), np.full(len(rows), np.nan)
    keep = [j for j, r in enumerate(rows) if r + head.lookahead < L]
    if not keep:
        return out
    at = torch.tensor([rows[j] for j in keep])  # [M']
    blocks = {"DT": hidden[at], "DT1": hidden[(at + 1).clamp(max=L - 1)], "DT2": hidden[(at + 2).clamp(max=L - 1)]}
    if "LS" in head.blocks:
        M = len(keep)
        blocks["LS"] = lookahead_scores(logits[torch.cat([at, at + 1])], torch.arange(M), M + torch.arange(M),
                                        seq[at + 1], seq[(at + 2).clamp(max=L - 1)])
    x = torch.cat([blocks[b].float() for b in head.blocks], dim=-1).double().numpy()  # [M', F]
    out[keep] = head.logits(x)
    return out


def window_stats(
    logits: torch.Tensor,  # [L, V]: the target's logits, row r predicting token r + 1 of the sequence
    rows: list[int],  # [M]: the row with each acceptance's (draft) token as the input
    windows: tuple[int, ...],
    line_ends: list[int],  # [M]: one past the last row of the line after each swap's line
) -> dict[str, np.ndarray]:  # name -> [M]
    """The statistics of the module docstring for each acceptance; a window is clipped at the sequence's end."""
    lp = torch.log_softmax(logits.float(), -1)  # [L, V]
    entropy = -(lp.exp() * lp).sum(-1)  # [L]
    top2 = lp.topk(2, -1).values  # [L, 2]
    margin = top2[:, 0] - top2[:, 1]  # [L]
    out: dict[str, list[float]] = {}
    for row, end in zip(rows, line_ends):
        spans = [(f"{w}", row + w) for w in windows] + [("line2", end)]
        for name, stop in spans:
            stop = max(row + 1, min(stop, len(margin)))
            out.setdefault(f"margin_min_{name}", []).append(float(margin[row:stop].min()))
            out.setdefault(f"entropy_mean_{name}", []).append(float(entropy[row:stop].mean()))
            out.setdefault(f"entropy_max_{name}", []).append(float(entropy[row:stop].max()))
    return {k: np.array(v) for k, v in out.items()}


def harm_score(name: str, values: np.ndarray) -> np.ndarray:
    """Higher = more alarming; a missing value (no verdict: nan) the least alarming of all."""
    return np.nan_to_num(-values if name.startswith(HARM_IF_LOW) else values, nan=-np.finfo(float).max)


def line_end(tokenizer, tokens: list[int], index: int) -> int:
    """The index of the token holding the newline that ends the line after the one holding
    ``tokens[index]`` (the response's length when it has none): the window's rows then predict the
    tokens after the swap up to that newline. A swapped token that holds a newline ends its own line."""
    newlines = 0
    for k in range(index, len(tokens)):
        newlines += tokenizer.decode([tokens[k]]).count("\n")
        if newlines >= 2:
            return k
    return len(tokens)


def judge_runs(item: str, questions: dict[str, str]) -> tuple[list[dict], dict[str, dict]]:
    """``FOLDER:SPEC``'s judge runs with a judged acceptance, and the folder's lossless runs by question."""
    folder, sep, spec = item.rpartition(":")
    if not sep or not folder:
        raise SystemExit(f"--runs {item!r}: give FOLDER:SPEC, e.g. out/cal:judge@0.1")
    runs = read_records(Path(folder) / "runs.jsonl", required=("spec", "qid"))[0]
    lossless = {r["qid"]: r for r in runs if r["spec"] == "lossless"}
    mine = [r for r in runs if r["spec"] == spec and r.get("judged_tokens") and r["qid"] in lossless]
    if not mine:
        raise SystemExit(f"{folder} holds no {spec} run with a judged acceptance and a lossless run beside it "
                         f"(specs there: {sorted({r['spec'] for r in runs})})")
    missing = sorted({r["qid"] for r in mine} - set(questions))
    if missing:
        raise SystemExit(f"{len(missing)} questions of {folder} are in no --questions file (e.g. {missing[0]})")
    return mine, lossless


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--runs", action="append", required=True, metavar="FOLDER:SPEC",
                   help="an eval/calibrate output folder and the judge operating point to read (repeatable)")
    p.add_argument("--questions", action="append", required=True, type=Path,
                   help="question files (JSONL) the runs were made on (repeatable)")
    p.add_argument("--task", default="gsm8k-program")
    p.add_argument("--windows", default="4,8,16", help="window lengths after each acceptance, in tokens")
    p.add_argument("--dtype", default="auto", help="auto: bf16 where the CPU computes it natively")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--judge", type=Path, default=None,
                   help="a target-only judge file: also score each acceptance with its logit (judge_logit)")
    p.add_argument("--out", type=Path, default=None, help="also write the results as JSON here")
    args = p.parse_args(argv)
    head = None if args.judge is None else JudgeHead.load(args.judge)
    if head is not None and not set(head.blocks) <= {"DT", "DT1", "DT2", "LS"}:
        raise SystemExit(f"--judge {args.judge}: setup {head.setup} reads the draft's hidden states, which a "
                         "target forward over the response does not give: give a judge of DT, DT1, DT2 and LS")
    from trtllm_autojudge.models.dtype import resolve_dtype
    from trtllm_autojudge.models.embedded import load_target

    windows = tuple(int(w) for w in args.windows.split(","))
    torch.set_num_threads(args.threads)
    task = load_task(args.task)
    questions = {}
    for path in args.questions:
        for line in path.read_text().splitlines():
            q = json.loads(line)["question"]
            questions[problem_id(q)] = q
    sets = [judge_runs(item, questions) for item in args.runs]  # checked before the model loads
    target, tokenizer = load_target("tuned", adapter=task.shipped_model_path("adapter"))
    target.model.to(resolve_dtype(args.dtype)).eval()
    items, responses = [], []
    for item, (mine, lossless) in zip(args.runs, sets):
        for r in tqdm(mine, desc=item, unit="response"):
            changed = not task.checker.same(r["answer"], lossless[r["qid"]]["answer"])
            prompt = task.prompt_ids(tokenizer, questions[r["qid"]])
            seq = torch.tensor(prompt + r["tokens"])  # [L]
            with torch.no_grad():
                hidden = target.model.model(seq[None]).last_hidden_state[0]  # [L, H], after the final norm
                logits = target.model.lm_head(hidden)  # [L, V]
            lp = torch.log_softmax(logits.float(), -1)  # [L, V]
            judged = r["judged_tokens"]  # [(index in the response, draft token, target token)]
            rows = [len(prompt) + i for i, _, _ in judged]
            stats = window_stats(logits, rows, windows, [len(prompt) + line_end(tokenizer, r["tokens"], i)
                                                        for i, _, _ in judged])
            stats["lp_target_token"] = np.array([float(lp[row - 1, t]) for row, (_, _, t) in zip(rows, judged)])
            stats["lp_draft_token"] = np.array([float(lp[row - 1, d]) for row, (_, d, _) in zip(rows, judged)])
            if head is not None:
                stats["judge_logit"] = judge_logits(head, logits.float(), hidden.float(), seq, rows)
            responses.append({"changed": changed, "judged": len(judged),
                              "most_alarming": {k: float(harm_score(k, v).max()) for k, v in stats.items()}})
            if changed and len(judged) > 1:
                continue  # no one acceptance is known to be the cause
            for j in range(len(judged)):
                items.append({"harmful": changed, **{k: float(v[j]) for k, v in stats.items()}})
    harmful = np.array([it["harmful"] for it in items])
    if harmful.sum() == 0 or harmful.all():
        raise SystemExit(f"{int(harmful.sum())} harmful and {int((~harmful).sum())} harmless acceptances: "
                         "give runs with both (more thresholds or questions)")
    names = [k for k in items[0] if k != "harmful"]
    result = {"runs": args.runs, "harmful": int(harmful.sum()), "harmless": int((~harmful).sum()), "statistics": {}}
    print(f"acceptances: {result['harmful']} harmful (the sole acceptance of a changed response), "
          f"{result['harmless']} harmless (in responses that kept their answer)")
    print(f"{'statistic':<22}{'ROC-AUC':>8}   harmless also stopped by a gate at each harmful value")
    for name in names:
        score = harm_score(name, np.array([it[name] for it in items]))
        auc = float(roc_auc_score(harmful, score))
        gates = sorted(score[harmful].tolist(), reverse=True)
        stopped = [float((score[~harmful] >= g).mean()) for g in gates]
        result["statistics"][name] = {"roc_auc": auc, "harmless_stopped_at_each_harmful": stopped}
        print(f"{name:<22}{auc:>8.3f}   " + " ".join(f"{s:.0%}" for s in stopped))
    changed = np.array([r["changed"] for r in responses])
    result["responses"] = {"changed": int(changed.sum()), "kept": int((~changed).sum()), "roc_auc": {}}
    print(f"\nresponses with an acceptance: {int(changed.sum())} changed, {int((~changed).sum())} kept; "
          "ROC-AUC of the most alarming acceptance")
    for name in names:
        auc = float(roc_auc_score(changed, [r["most_alarming"][name] for r in responses]))
        result["responses"]["roc_auc"][name] = auc
        print(f"{name:<22}{auc:>8.3f}")
    auc_judged = float(roc_auc_score(changed, [r["judged"] for r in responses]))
    result["responses"]["roc_auc"]["judged_acceptances"] = auc_judged
    print(f"{'judged_acceptances':<22}{auc_judged:>8.3f}   (the number of acceptances, for scale)")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
