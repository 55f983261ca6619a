#!/usr/bin/env python3
"""Train the embedded draft for a task's TUNED target by distillation, and measure it.

Reproduces the shipped drafts (``assets/draft.safetensors`` and, for the target of
``target_lora_program``, ``assets/draft_program.safetensors``):

    python build_scripts/train_draft.py                        # gsm8k-cot: labels, training (resumes from --work), save
    python build_scripts/train_draft.py --task gsm8k-program --layers 8 --epochs 2 --per-template 30 --comment-noise 0.7
    python build_scripts/train_draft.py [--task T ...] --measure  # alpha, cost per token, accepted tokens per cycle

The draft is the tuned target's first ``--layers`` decoder layers with the target's embeddings and
LM head (see trtllm_autojudge/models/embedded_draft.py). Training data: the task's responses (worked
solutions, or programs) to fresh variants of the TRAINING templates (seed ``--seed``), teacher-forced through the tuned target; the
draft learns the target's greedy token at every response position (cross-entropy on the target's
argmax), through LoRA factors on its layers and full norm weights. ``--comment-noise S`` perturbs the
comment lines of a share S of the training programs (:mod:`trtllm_autojudge.data.comment_noise`) and
keeps the target's token at every position, so the draft also learns what the target writes after a
comment it would not have written (what follows an accepted harmless swap). Held-out alpha (the share of
positions where the draft's greedy token equals the target's) is logged on fresh variants of the
training templates and on variants of the evaluation templates.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import statistics
import sys
import time
from pathlib import Path

import torch
from tqdm import tqdm

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.cache_dir import cache_root  # noqa: E402
from trtllm_autojudge.data.batches import make_batches, pad_batch  # noqa: E402
from trtllm_autojudge.data.comment_noise import noisy_problems  # noqa: E402
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate  # noqa: E402
from trtllm_autojudge.decoding.tree import DraftTree  # noqa: E402
from trtllm_autojudge.models.dtype import CHOICES, dtype_name, resolve_dtype  # noqa: E402
from trtllm_autojudge.models.embedded import load_target  # noqa: E402
from trtllm_autojudge.models.embedded_draft import cut_model, load_draft  # noqa: E402
from trtllm_autojudge.models.finetune import EMBEDDED_TASK_DTYPES, load_checkpoint, lr_at, save_checkpoint  # noqa: E402
from trtllm_autojudge.models.lora import attach_lora, save_adapter  # noqa: E402
from trtllm_autojudge.tasks import load_task  # noqa: E402
from trtllm_autojudge.tasks.base import ASSETS  # noqa: E402

log = logging.getLogger("train_draft")
TRAIN_KEYS = ("teacher", "layers", "per_template", "seed", "rank", "alpha", "lr", "batch", "epochs", "warmup")
NOISE_KEYS = ("comment_noise", "noise_lines")  # recorded only when comment noise is on (the shipped drafts' tags stay)
HELDOUT_SEED = 2_000  # fresh variants for held-out alpha (training uses --seed, the target adapter seed 0)


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="gsm8k-cot", choices=sorted(EMBEDDED_TASK_DTYPES), help="the task whose tuned target the draft serves")
    p.add_argument("--out", type=Path, default=None, help="draft file to write (default: the task's shipped draft)")
    p.add_argument("--adapter", type=Path, default=None,
                   help="the tuned target's adapter the draft serves (default: the task's shipped adapter)")
    p.add_argument("--comment-noise", type=float, default=0.0, metavar="S",
                   help="share of the training programs whose comment lines are perturbed (default 0: clean)")
    p.add_argument("--noise-lines", type=float, default=0.5, metavar="P",
                   help="with --comment-noise: each comment line of a chosen program is perturbed with probability P")
    p.add_argument("--dtype", default=None, choices=CHOICES,
                   help="training compute dtype (default: float32 for gsm8k-cot, as its shipped files were made; "
                        "auto for gsm8k-program: bf16 where the CPU computes it natively, as the demo runs)")
    p.add_argument("--work", type=Path, default=None, help="labels and checkpoints (default: <cache>/train_draft)")
    p.add_argument("--layers", type=int, default=6, help="the draft runs the target's first LAYERS layers")
    p.add_argument("--per-template", type=int, default=10, help="training variants per training template")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--rank", type=int, default=64)
    p.add_argument("--alpha", type=float, default=64.0)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--epochs", type=int, default=6)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--save-every", type=int, default=10)
    p.add_argument("--eval-every", type=int, default=88, help="log held-out alpha every N steps")
    p.add_argument("--threads", type=int, default=2, help="torch threads (1 is much faster when other jobs share the CPU)")
    p.add_argument("--measure", action="store_true", help="only measure the draft at --out")
    p.add_argument("--measure-prompts", type=int, default=8, help="prompts per group for speculative decoding")
    p.add_argument("--max-new-tokens", type=int, default=256)
    args = p.parse_args(argv)
    args.dtype = args.dtype or EMBEDDED_TASK_DTYPES[args.task]
    args.task_obj = load_task(args.task)
    args.adapter = args.adapter or ASSETS / args.task_obj.shipped_adapter
    if not args.adapter.is_file():
        p.error(f"--adapter {args.adapter}: no such file (train it with build_scripts/train_target_adapter.py)")
    args.out = args.out or ASSETS / args.task_obj.shipped_draft
    return args


@torch.inference_mode()
def teacher_labels(target_model, batches, pad_id: int, desc: str) -> list[torch.Tensor]:
    """The target's greedy token at every response position of every batch ([n] int32 each)."""
    labels = []
    for batch in tqdm(batches, desc=desc, unit="batch"):
        ids, mask, learn = pad_batch(batch, pad_id)  # [b, w] each
        hidden = target_model.model(input_ids=ids, attention_mask=mask).last_hidden_state  # [b, w, H]
        labels.append(target_model.lm_head(hidden[learn]).argmax(-1).to(torch.int32))  # [n]
    return labels


def cached(path: Path, make):
    value = load_checkpoint(path)
    if value is None:
        value = make()
        save_checkpoint(path, value)
    return value


def heldout_problems(task, seen: set[str]) -> dict[str, list]:
    """Held-out sets: fresh variants of the training templates (minus ``seen``), variants of the eval templates."""
    return {
        "train_templates_fresh": [p for p in task.problems("train", False, 1, HELDOUT_SEED) if p.question not in seen],
        "eval_templates": task.problems("eval", False, 2, HELDOUT_SEED),
    }


def draft_logits(draft, batch, pad_id: int) -> torch.Tensor:
    ids, mask, learn = pad_batch(batch, pad_id)  # [b, w] each
    hidden = draft.model(input_ids=ids, attention_mask=mask).last_hidden_state  # [b, w, H]
    return draft.lm_head(hidden[learn])  # [n, V]


@torch.inference_mode()
def heldout_alpha(draft, sets, pad_id: int, dtype: torch.dtype) -> dict[str, float]:
    """Teacher-forced agreement of the draft's greedy token with the target's, per held-out set
    (computed as training computes: under autocast to ``dtype``, the LoRA factors being float32)."""
    was_training = draft.training
    draft.eval()
    out = {}
    for name, (batches, labels) in sets.items():
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            hits = sum(int((draft_logits(draft, b, pad_id).argmax(-1) == y).sum()) for b, y in zip(batches, labels))
        out[name] = round(hits / sum(len(y) for y in labels), 4)
    draft.train(was_training)
    return out


def train(args) -> None:
    work = args.work or cache_root() / "train_draft"
    work.mkdir(parents=True, exist_ok=True)
    task, dtype = args.task_obj, resolve_dtype(args.dtype)
    teacher = hashlib.sha1(args.adapter.read_bytes()).hexdigest()[:10]  # labels depend on the tuned target
    settings = {"teacher": teacher, **{k: getattr(args, k) for k in TRAIN_KEYS[1:]}}
    if task.name != "gsm8k-cot" or dtype != torch.float32:  # the shipped gsm8k-cot draft's tag stays as it was
        settings.update(task=task.name, dtype=dtype_name(dtype))
    if args.comment_noise:
        settings.update({k: getattr(args, k) for k in NOISE_KEYS})
    tag = hashlib.sha1(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:10]
    torch.manual_seed(args.seed)
    target, tokenizer = load_target("tuned", adapter=args.adapter)
    target.model.to(dtype)  # frozen, as the demo runs it; the draft's LoRA factors and norms stay float32
    pad = tokenizer.pad_token_id

    train_problems = task.problems("train", False, args.per_template, args.seed)
    texts = [q for q, _ in noisy_problems(train_problems, args.comment_noise, args.noise_lines, args.seed)]  # share 0: clean
    batches = make_batches(tokenizer, texts, args.batch, args.seed, encode=task.training_ids)
    noise = f"-noise{args.comment_noise}x{args.noise_lines}" if args.comment_noise else ""
    labels = cached(work / f"labels-{teacher}-train-{args.per_template}-{args.seed}-{args.batch}{noise}.pt",
                    lambda: teacher_labels(target.model, batches, pad, "target labels (train)"))
    seen = {p.question for p in train_problems} | task.trained_questions()
    heldout = {}
    for name, problems in heldout_problems(task, seen).items():
        b = make_batches(tokenizer, problems, 8, 0, encode=task.training_ids)
        heldout[name] = (b, cached(work / f"labels-{teacher}-{name}.pt",
                                   lambda: teacher_labels(target.model, b, pad, f"target labels ({name})")))

    layers = list(range(args.layers))
    draft = cut_model(target.model, layers)
    wrapped = attach_lora(draft, args.rank, args.alpha)
    norms = {n: p for n, p in draft.named_parameters() if n.endswith("norm.weight")}
    for p in norms.values():
        p.requires_grad_(True)
    params = [p for m in wrapped.values() for p in (m.lora_A, m.lora_B)] + list(norms.values())
    optimizer = torch.optim.AdamW(params, lr=args.lr, weight_decay=0.0)
    total = len(batches) * args.epochs
    log.info("draft: target layers 0-%d, %d trainable parameters; %d batches, %d labelled tokens, %d steps",
             args.layers - 1, sum(p.numel() for p in params), len(batches), sum(len(y) for y in labels), total)

    ckpt_path = work / f"ckpt-{tag}.pt"
    step, history, alphas = 0, [], []
    state = load_checkpoint(ckpt_path)
    if state is not None:
        for name, value in state["tensors"].items():
            draft.get_parameter(name).data.copy_(value)
        optimizer.load_state_dict(state["optimizer"])
        step, history, alphas = state["step"], state["history"], state["alphas"]
        log.info("resuming from %s at step %d", ckpt_path, step)
    else:
        alphas.append({"step": 0, **heldout_alpha(draft, heldout, pad, dtype)})
        log.info("held-out alpha before training: %s", alphas[-1])

    draft.train()
    bar = tqdm(total=total, initial=step, desc="draft", unit="step")
    while step < total:
        for group in optimizer.param_groups:
            group["lr"] = lr_at(step, total, args.warmup, args.lr)
        i = step % len(batches)
        with torch.autocast("cpu", dtype=dtype, enabled=dtype != torch.float32):
            loss = torch.nn.functional.cross_entropy(draft_logits(draft, batches[i], pad).float(), labels[i].long())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        step += 1
        history.append(round(loss.item(), 4))
        bar.set_postfix(loss=f"{sum(history[-10:]) / len(history[-10:]):.3f}")
        bar.update(1)
        if step % args.eval_every == 0 or step == total:
            alphas.append({"step": step, **heldout_alpha(draft, heldout, pad, dtype)})
            bar.write(f"step {step}: held-out alpha {alphas[-1]}")
        if step % args.save_every == 0 or step == total:
            save_checkpoint(ckpt_path, {
                "step": step, "history": history, "alphas": alphas, "optimizer": optimizer.state_dict(),
                "tensors": {n: p.detach().clone() for n, p in draft.named_parameters() if p.requires_grad}})
    bar.close()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    save_adapter(args.out, wrapped, args.rank, args.alpha, base=f"tuned embedded target ({args.adapter.name})",
                 full={n: p for n, p in norms.items()}, layers=",".join(map(str, layers)), settings=json.dumps(settings),
                 heldout_alpha=json.dumps(alphas[-1]), task=task.name, dtype=dtype_name(dtype))
    log.info("wrote %s (%.1f MB); held-out alpha %s", args.out, args.out.stat().st_size / 1e6, alphas[-1])


def step_times(models, prompt: list[int], steps: int = 64) -> list[float]:
    """Median seconds of one single-token decode step after ``prompt``, per model. The models take
    turns step by step, so that load from other processes hits them alike."""
    sessions = [m.session() for m in models]
    tokens = [int(s.forward(prompt).logits[-1].argmax()) for s in sessions]
    times = [[] for _ in models]
    for _ in range(steps):
        for i, s in enumerate(sessions):
            t = time.perf_counter()
            tokens[i] = int(s.forward([tokens[i]]).logits[-1].argmax())
            times[i].append(time.perf_counter() - t)
    return [statistics.median(t) for t in times]


@torch.inference_mode()
def greedy_alpha(target, draft, prompt: list[int], response: list[int]) -> tuple[int, int]:
    """(hits, positions): the draft's teacher-forced greedy token vs the target's own greedy response."""
    ids = torch.tensor([prompt + response])  # [1, L]
    d = draft.model(ids).logits[0, len(prompt) - 1:-1].argmax(-1)  # [len(response)]
    return int((d == ids[0, len(prompt):]).sum()), len(response)


def measure(args) -> None:
    task, dtype = args.task_obj, resolve_dtype(args.dtype)
    target, tokenizer = load_target("tuned", adapter=args.adapter)
    draft, _ = load_draft(target, path=args.out)
    target.model.to(dtype)
    draft.model.to(dtype)
    n = args.measure_prompts
    seen = task.trained_questions()  # the shipped adapter and draft
    groups = {
        "eval_templates_original": task.problems("eval", True, 0, 0)[:n],
        "train_templates_fresh": heldout_problems(task, seen)["train_templates_fresh"][:n],
    }
    prompt = task.prompt_ids(tokenizer, groups["eval_templates_original"][0].question)
    t_target, t_draft = step_times([target, draft], prompt)
    report = {"draft": draft.name, "dtype": dtype_name(dtype), "target_step_s": round(t_target, 4), "draft_step_s": round(t_draft, 4),
              "cost_per_token": round(t_draft / t_target, 3)}
    for name, problems in groups.items():
        prompts = [task.prompt_ids(tokenizer, p.question) for p in problems]
        responses = [greedy_generate(target, p, args.max_new_tokens) for p in tqdm(prompts, desc=f"{name} greedy", unit="q")]
        hits = [greedy_alpha(target, draft, p, r) for p, r in zip(prompts, responses)]
        report[f"{name}_alpha"] = round(sum(h for h, _ in hits) / sum(c for _, c in hits), 4)
        for k in (4, 8):
            accepted = cycles = 0
            for p, r in tqdm(list(zip(prompts, responses)), desc=f"{name} K={k}", unit="q"):
                result = speculative_generate(target, draft, p, tree=DraftTree.chain(k), max_new_tokens=args.max_new_tokens)
                if result.tokens != r:
                    log.warning("lossless speculative output differs from target greedy on one prompt (%s, K=%d)", name, k)
                accepted += sum(c.accepted for c in result.cycles)
                cycles += len(result.cycles)
            report[f"{name}_K{k}_accepted_per_cycle"] = round(accepted / cycles, 3)
            report[f"{name}_K{k}_tokens_per_target_forward"] = round((accepted + cycles) / cycles, 3)
    print(json.dumps(report, indent=1))


def main(argv=None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    if args.measure:
        measure(args)
    else:
        train(args)


if __name__ == "__main__":
    main()
