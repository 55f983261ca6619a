#!/usr/bin/env python3
"""Train an EAGLE-1/2 head for a task's TUNED target (the EAGLE route's drafter); resumable.

    python build_scripts/train_eagle.py --task gsm8k-program                  # train (resumes from --work), save
    python build_scripts/train_eagle.py --task gsm8k-program --stop-after 200  # 200 steps now, the rest later
    python build_scripts/train_eagle.py --task gsm8k-program --write-head DIR  # the shipped head, for the converter

Teacher: the tuned target (the task's shipped adapter, or ``--adapter``), frozen, teacher-forced over
the task's responses to variants of its TRAINING templates (``--per-template`` per template, seed
``--seed``: for gsm8k-program, the training programs). Recipe (EAGLE's; trtllm_autojudge/models/
eagle_training.py): the head's features regress the target's next final-norm state, and its tokens
learn the target's next-token distribution through the target's frozen LM head, with uniform noise on
the input states; ``--unroll D`` also trains drafting depths 2..D on the head's own features, as it
drafts them (training-time test, as EAGLE-3 and HASS do). The head starts from the target's embedding
(kept frozen) and random layers.
Alpha per depth (the share of chain drafts the target would accept at each depth) is logged every
``--eval-every`` steps on the target's greedy answers to fresh variants of the training templates
(cached in ``--work``). Compute: bf16 where the CPU has native bf16 (``--dtype auto``), float32
weights. A stopped run (``--stop-after``, or killed) goes on from its last checkpoint when rerun with
the same settings.

Output (``--out``): a head directory (``EagleHead.save``: the layout TensorRT-LLM's EAGLE converter
reads) recording the target's tokenizer fingerprint, for ``build-engines --route eagle --eagle_head``;
with ``--ship``, the head without the target's embedding as the task's shipped one (``--draft eagle``);
with ``--report F.json``, alpha per depth and the loss as training went, and ``F.png``.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import logging
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.cache_dir import cache_root  # noqa: E402
from trtllm_autojudge.data.batches import make_batches  # noqa: E402
from trtllm_autojudge.decoding.speculative import greedy_generate  # noqa: E402
from trtllm_autojudge.models.dtype import CHOICES, dtype_name, resolve_dtype  # noqa: E402
from trtllm_autojudge.models.eagle_head import load_eagle_head, random_eagle_head, read_head_meta  # noqa: E402
from trtllm_autojudge.models.eagle_plot import plot_alpha  # noqa: E402
from trtllm_autojudge.models.eagle_training import EagleTraining, train_head  # noqa: E402
from trtllm_autojudge.models.embedded import load_target  # noqa: E402
from trtllm_autojudge.models.finetune import EMBEDDED_TASK_DTYPES  # noqa: E402
from trtllm_autojudge.models.vocab_subset import tokenizer_fingerprint  # noqa: E402
from trtllm_autojudge.tasks import load_task  # noqa: E402
from trtllm_autojudge.tasks.base import ASSETS  # noqa: E402

log = logging.getLogger("train_eagle")
HELDOUT_SEED = 2_000  # fresh variants for held-out alpha, as build_scripts/train_draft.py
RECIPE_KEYS = ("layers", "per_template", "seed", "batch", "epochs", "steps", "lr", "warmup", "noise", "cls_weight",
               "unroll")


def nonnegative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def parse_args(argv=None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="gsm8k-program", choices=sorted(EMBEDDED_TASK_DTYPES),
                   help="the task whose tuned target the head drafts for")
    p.add_argument("--adapter", type=Path, help="the tuned target's adapter (default: the task's shipped adapter)")
    p.add_argument("--out", type=Path, help="head directory to write (default: WORK/head-TASK)")
    p.add_argument("--work", type=Path, help="checkpoints and held-out answers (default: <cache>/train_eagle)")
    p.add_argument("--layers", type=int, default=1, help="decoder layers of the head (EAGLE-1: 1)")
    p.add_argument("--per-template", type=int, default=10, help="training variants per training template")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--batch", type=int, default=4, help="sequences per step (packed into one forward)")
    p.add_argument("--epochs", type=int, default=2)
    p.add_argument("--steps", type=int, help="total steps (default: epochs x batches)")
    p.add_argument("--lr", type=float, default=3e-4)
    p.add_argument("--warmup", type=int, default=20)
    p.add_argument("--noise", type=nonnegative, default=0.1, help="uniform noise amplitude on the input states")
    p.add_argument("--cls-weight", type=nonnegative, default=0.1, help="weight of the token cross-entropy")
    p.add_argument("--init", type=Path, metavar="HEAD",
                   help="start from this head (a directory this script wrote) instead of random layers, e.g. to "
                        "train deeper depths (--unroll) after a depth-1 run")
    p.add_argument("--unroll", type=int, default=1,
                   help="drafting depths the loss reads: 1 is EAGLE's recipe; D > 1 also trains depths 2..D on the "
                        "head's own features, as it drafts them (models/eagle_training.py: unrolled_features)")
    p.add_argument("--depth", type=int, default=4, help="alpha is logged for depths 1..DEPTH")
    p.add_argument("--heldout", type=int, default=8, help="held-out prompts for alpha")
    p.add_argument("--max-new-tokens", type=int, default=160, help="length of the held-out greedy answers")
    p.add_argument("--eval-every", type=int, default=100)
    p.add_argument("--save-every", type=int, default=20)
    p.add_argument("--stop-after", type=int, help="stop after this many steps of this run (rerun to go on)")
    p.add_argument("--dtype", default="auto", choices=CHOICES, help="compute dtype (auto: bf16 where native)")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--report", type=Path,
                   help="also write alpha per depth and the loss as training went (JSON, and a PNG beside it), at "
                        "every stop")
    p.add_argument("--ship", action="store_true",
                   help="when done, also write the head without the target's embedding as the task's shipped EAGLE head "
                        "(trtllm_autojudge/assets; what --draft eagle loads)")
    p.add_argument("--write-head", type=Path, metavar="DIR",
                   help="do not train: write the task's shipped EAGLE head, with the tuned target's embedding, as the "
                        "head directory TensorRT-LLM's EAGLE converter reads (build-engines --route eagle --eagle_head DIR)")
    args = p.parse_args(argv)
    if args.unroll < 1:
        p.error(f"--unroll is a number of drafting depths: give 1 or more, got {args.unroll}")
    return args


def heldout_answers(target, tokenizer, task, seen: set[str], args, path: Path) -> list[tuple[list[int], int]]:
    """(prompt + the target's greedy answer, prompt length) for fresh training-template variants; cached."""
    if path.is_file():
        return [(ids, start) for ids, start in json.loads(path.read_text())]
    problems = [p for p in task.problems("train", False, 1, HELDOUT_SEED) if p.question not in seen][: args.heldout]
    out = []
    for problem in problems:
        prompt = task.prompt_ids(tokenizer, problem.question)
        out.append((prompt + greedy_generate(target, prompt, args.max_new_tokens), len(prompt)))
    path.write_text(json.dumps(out))
    return out


def main(argv=None) -> None:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(name)s: %(message)s")
    torch.set_num_threads(args.threads)
    task, dtype = load_task(args.task), resolve_dtype(args.dtype)
    adapter = args.adapter or ASSETS / task.shipped_adapter
    work = args.work or cache_root() / "train_eagle"
    work.mkdir(parents=True, exist_ok=True)
    teacher = hashlib.sha1(adapter.read_bytes()).hexdigest()[:10]
    target, tokenizer = load_target("tuned", adapter=adapter)
    if args.write_head:
        shipped = load_eagle_head(task.shipped_model_path("eagle_head"), hidden_size=target.hidden_size,
                                  vocab_size=target.vocab_size, tokenizer=tokenizer_fingerprint(tokenizer),
                                  dtype=torch.float32, embedding=target.model.get_input_embeddings().weight)
        log.info("wrote %s", shipped.save(args.write_head))
        return
    target.model.to(dtype)
    train = task.problems("train", False, args.per_template, args.seed)
    batches = make_batches(tokenizer, train, args.batch, args.seed, encode=task.training_ids)
    steps = args.steps or args.epochs * len(batches)
    init = None if args.init is None else read_head_meta(args.init)[0]
    settings_before = None  # the training questions of the --init head
    recipe = {"task": task.name, "teacher": teacher, "dtype": dtype_name(dtype),
              **{k: getattr(args, k) for k in RECIPE_KEYS}, "steps": steps,
              "init": None if init is None else hashlib.sha1(init.read_bytes()).hexdigest()[:10]}
    tag = hashlib.sha1(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:10]
    heldout = heldout_answers(target, tokenizer, task, {p.question for p in train} | task.trained_questions(), args,
                              work / f"heldout-{teacher}-{args.heldout}-{args.max_new_tokens}.json")
    fingerprint = tokenizer_fingerprint(tokenizer)
    head = random_eagle_head(target.model, args.layers, seed=args.seed,
                             meta={"target_model": target.name, "tokenizer": fingerprint, "task": task.name}).float()
    if init is not None:
        start = load_eagle_head(init, hidden_size=target.hidden_size, vocab_size=target.vocab_size, tokenizer=fingerprint,
                                dtype=torch.float32, embedding=target.model.get_input_embeddings().weight)
        if start.config != head.config:
            raise SystemExit(f"--init {args.init}: a {start.config.num_layers}-layer head; --layers is {args.layers}")
        head.load_state_dict(start.state_dict())
        settings_before = start.meta.get("settings")
    log.info("head: %d layers, %d trainable parameters; %d batches, %d steps, %s", args.layers,
             sum(p.numel() for n, p in head.named_parameters() if n != "embed_tokens.weight"), len(batches), steps,
             dtype_name(dtype))
    settings = EagleTraining(steps=steps, lr=args.lr, warmup=args.warmup, noise=args.noise,
                             cls_weight=args.cls_weight, unroll=args.unroll, depth=args.depth, eval_every=args.eval_every,
                             save_every=args.save_every, seed=args.seed)
    state = train_head(head, target.model, batches, heldout, tokenizer.pad_token_id, settings,
                       work / f"ckpt-{tag}.pt", dtype, args.stop_after)
    if args.report:
        write_report(args.report, recipe, state, len(heldout))
    if not state["done"]:
        log.info("stopped at step %d of %d: rerun with the same options to go on", state["step"], steps)
        return
    head.meta.update(training=json.dumps(recipe, sort_keys=True), heldout_alpha=json.dumps(state["alphas"][-1]),
                     settings={"per_template": args.per_template, "seed": args.seed,  # Task.trained_questions reads
                               "init": settings_before})  # them, the --init head's too
    out = head.save(args.out or work / f"head-{task.name}")
    log.info("wrote %s; held-out alpha per depth %s", out, state["alphas"][-1]["alpha"])
    if args.ship:
        if task.shipped_eagle_head is None:
            raise SystemExit(f"task {task.name} names no shipped EAGLE head file (Task.shipped_eagle_head)")
        log.info("wrote %s", head.save_without_embedding(ASSETS / task.shipped_eagle_head))


def write_report(path: Path, recipe: dict, state: dict, heldout: int) -> None:
    """Alpha per depth at each evaluation and the mean loss parts over the steps since the one before
    (JSON), and alpha per depth against the step (PNG beside it)."""
    history = state["history"]
    rows, before = [], 0
    for entry in state["alphas"]:
        window, before = history[before: entry["step"]], entry["step"]
        means = {k: round(sum(h[k] for h in window) / len(window), 4) if window else None for k in ("loss", "reg", "cls")}
        rows.append({**entry, **means})
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"recipe": recipe, "heldout_sequences": heldout, "done": state["done"],
                                "step": state["step"], "evaluations": rows}, indent=1))
    plot_alpha(rows, path.with_suffix(".png"), f"EAGLE head for {recipe['task']}: held-out alpha per depth")


if __name__ == "__main__":
    main()
