#!/usr/bin/env python3
"""Make the draft's vocabulary subset: the most frequent tokens of the task's training responses.

Reproduces ``trtllm_autojudge/assets/draft_vocab_gsm8k.safetensors``:

    python build_scripts/make_draft_vocab.py                 # --size 2048, 40 variants per template
    python build_scripts/make_draft_vocab.py --size 1024 --out out/vocab1024.safetensors

Counts the tokens of the worked solutions (``gsm8k-cot``) or programs (``gsm8k-program``) of
variants of the TRAINING templates, as the tuned target is trained on them (response + end-of-turn,
through the embedded tokenizer) and keeps the end-of-turn token, then the most frequent response
tokens, then the most frequent question tokens (names and items are copied into answers), then the
lowest ids (BPE merge order) up to ``--size``. It logs the share of response tokens the subset
covers on training and on EVALUATION-template variants (held out). The size (2048) and K = 2 were
chosen by a scan of tokens/s (docs/cpu.md, "The draft: candidates, chosen by tokens/s"). See
trtllm_autojudge/models/vocab_subset.py.
"""
from __future__ import annotations

import argparse
import logging
import sys
from collections import Counter
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from transformers import AutoConfig  # noqa: E402

from trtllm_autojudge.models.embedded import ASSETS, converted_checkpoint, load_tokenizer  # noqa: E402
from trtllm_autojudge.models.vocab_subset import most_frequent, tokenizer_fingerprint  # noqa: E402
from trtllm_autojudge.tasks import load_task  # noqa: E402

log = logging.getLogger("make_draft_vocab")
TASKS = ("gsm8k-cot", "gsm8k-program")
HELDOUT_SEED = 2_000


def token_counts(tokenizer, task, split: str, per_template: int, seed: int) -> tuple[Counter, Counter]:
    """Token counts of the responses (end-of-turn included) and of the questions of ``split``-template variants."""
    responses, questions = Counter(), Counter()
    for p in task.problems(split, False, per_template, seed):
        ids, n_prompt = task.training_ids(tokenizer, p)
        responses.update(ids[n_prompt:])
        questions.update(tokenizer(p.question, add_special_tokens=False).input_ids)
    return responses, questions


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", choices=TASKS, default="gsm8k-cot")
    p.add_argument("--size", type=int, default=2048, help="tokens in the subset")
    p.add_argument("--per-template", type=int, default=40, help="training variants counted per training template")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--out", type=Path, default=None, help="default: the task's shipped subset (assets/draft_vocab_gsm8k[_program].safetensors)")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    tokenizer = load_tokenizer()
    task = load_task(args.task)
    counts, question_counts = token_counts(tokenizer, task, "train", args.per_template, args.seed)
    heldout, _ = token_counts(tokenizer, task, "eval", 5, HELDOUT_SEED)
    source = {"task": args.task, "split": "train", "per_template": args.per_template, "seed": args.seed,
              "tokenizer": getattr(tokenizer, "name_or_path", "") and Path(tokenizer.name_or_path).name}
    vocab_size = AutoConfig.from_pretrained(converted_checkpoint()).vocab_size  # the models' output width
    subset = most_frequent([counts, question_counts], args.size, vocab_size, tokenizer_fingerprint(tokenizer),
                           always=[tokenizer.eos_token_id], meta=source)
    kept = set(subset.token_ids.tolist())
    subset.meta["heldout_coverage"] = sum(c for t, c in heldout.items() if t in kept) / max(sum(heldout.values()), 1)
    out = args.out or ASSETS / task.shipped_draft_vocab
    subset.save(out)
    log.info("%d tokens (%d distinct in %d counted response tokens): coverage %.4f on training responses, "
             "%.4f on evaluation-template responses; wrote %s", subset.size, len(counts), subset.meta["counted_tokens"],
             subset.meta["coverage"], subset.meta["heldout_coverage"], out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
