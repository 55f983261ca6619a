"""Mining over many prompts: resumable, sharded across MPI ranks, with a progress bar and costs."""
from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path
from typing import Sequence

from tqdm import tqdm

from ..generation.prompt_lookup import LookupWindows
from .fast import FastLabelMiner
from .lookup import LookupRegenerator
from .miner import LabelMiner, MiningConfig
from .mpi import shard_path, world
from .store import append_record, read_records, repair_tail


COST_KEYS = ("target_forwarded_tokens", "draft_forwarded_tokens", "regenerations", "wasted_regenerations",
             "wasted_target_tokens", "skipped_unlikely")


LOCAL_REGENERATORS = ("transformers", "lookup", "lookup-draft")  # `--regenerator` choices that run here
DEFAULT_WINDOWS = "3:64"  # `--lookup-windows` of mine, make_judge.py and bench_mining.py (docs/mining.md: 3:64 vs 8:64)


def local_regenerator(name: str, target, draft, batch_size: int = 1, reuse_cache: bool = True,
                      windows: LookupWindows = LookupWindows()):
    """The regeneration backend a command line names: None for ``transformers`` (make_miner's default);
    for ``lookup`` the one-request-at-a-time lookup backend at ``batch_size`` 1, else the batched
    transformers backend verifying looked-up windows (its prefix KV store off without
    ``reuse_cache``); the lookup one arbitrated by the draft (``lookup-draft``, batch 1 only).
    ``windows``: the lookup backends' window sizes. docs/mining.md."""
    if name not in LOCAL_REGENERATORS:
        raise ValueError(f"unknown regenerator {name!r}: choose one of {', '.join(LOCAL_REGENERATORS)}")
    if name == "transformers":
        return None
    if name == "lookup-draft" and not hasattr(draft, "session"):
        raise ValueError(f"the lookup-draft regenerator arbitrates with a draft model; the {draft.name} has none: "
                         f"use --regenerator lookup or transformers")
    if batch_size == 1:
        return LookupRegenerator(target, windows.min_window, windows.max_window, windows.references,
                                 draft=draft if name == "lookup-draft" else None)
    if name == "lookup-draft":
        raise ValueError("the lookup-draft regenerator serves one prompt at a time: use --batch-size 1, "
                         "or --regenerator lookup to batch prompts")
    from ..generation.regen_transformers import TransformersRegenerator

    return TransformersRegenerator(target, cache_bytes=2**31 if reuse_cache else 0, lookup=windows)


def parse_windows(text: str) -> LookupWindows:
    """``MIN:MAX`` (``--lookup-windows``) as :class:`LookupWindows`."""
    try:
        low, high = (int(x) for x in text.split(":"))
        return LookupWindows(low, high)
    except ValueError as e:
        raise ValueError(f"--lookup-windows {text!r}: give MIN:MAX with 1 <= MIN <= MAX, e.g. 3:64 ({e})") from None


def make_miner(target, draft, checker, decode, config: MiningConfig, batch_size: int = 1, regenerator=None):
    """Today's sequential miner for batch 1, depth 1 and no backend given, or for the one-request-at-a-time
    :class:`.lookup.LookupRegenerator` (served lazily: nothing speculative is computed and dropped);
    else the fast one (same labels)."""
    if isinstance(regenerator, LookupRegenerator):
        if batch_size != 1:
            raise ValueError("this lookup regenerator serves one prompt at a time: use --batch-size 1 "
                             "(local_regenerator('lookup', ..., batch_size) builds the batched one)")
        return LabelMiner(target, draft, checker, decode, config, regenerator=regenerator)
    if batch_size == 1 and config.depth == 1 and regenerator is None:
        return LabelMiner(target, draft, checker, decode, config)
    if regenerator is None:
        from ..generation.regen_transformers import TransformersRegenerator

        regenerator = TransformersRegenerator(target, cache_bytes=2**31 if config.reuse_cache else 0)
    return FastLabelMiner(target, draft, checker, decode, regenerator, config, batch_size)


def summarize(stats: dict) -> dict:
    """Derived rates of a run's summed costs (labels/min, unimportant share, wasted share)."""
    labels = max(stats["labels"], 1)
    return stats | {
        "labels_per_minute": 60 * stats["labels"] / max(stats["seconds"], 1e-9),
        # per minute of this process's CPU time (all ranks summed): what a busy shared machine distorts least
        "labels_per_cpu_minute": 60 * stats["labels"] / max(stats.get("cpu_seconds", 0.0), 1e-9),
        "unimportant_share": (stats["labels"] - stats["important"]) / labels,
        "target_tokens_per_label": stats["target_forwarded_tokens"] / labels,
        "wasted_share": stats["wasted_target_tokens"] / max(stats["target_forwarded_tokens"], 1),
    }


def mine_prompts(
    miner: LabelMiner | FastLabelMiner,
    prompts: Sequence[tuple[str, list[int], dict | None]],  # (id, prompt_ids, example)
    out: str | Path,
    progress: bool = True,
    max_minutes: float | None = None,
) -> dict:
    """Mine every prompt not yet in ``out``; returns the cost summary of this run (rank 0: merged).

    With ``max_minutes`` no new prompt is started after that time (prompts in flight finish); a
    rerun continues with the rest.
    """
    out = Path(out)
    ids = [str(p[0]) for p in prompts]
    if len(set(ids)) != len(ids):
        raise ValueError("prompt ids must be unique: they are how a resumed run knows what is done")
    rank, size, comm = world()
    shard = out if size == 1 else shard_path(out, rank, size)
    repair_tail(shard)
    shards = {out, shard} | {shard_path(out, r, size) for r in range(size) if size > 1}  # every rank's: a rerun
    done = {str(r["id"]) for path in shards for r in read_records(path, warn=rank == 0)[0]}  # may order prompts anew
    todo = [p for i, p in enumerate(prompts) if i % size == rank and str(p[0]) not in done]
    stats = {"prompts": 0, "labels": 0, "important": 0} | dict.fromkeys(COST_KEYS, 0)
    t0, cpu0 = time.perf_counter(), time.process_time()
    bar = tqdm(total=len(todo), desc=f"mining (rank {rank}/{size})" if size > 1 else "mining", unit="prompt",
               disable=not progress, file=sys.stderr)

    templates = {str(p[0]): (p[2] or {}).get("template_id") for p in prompts}  # the template split's unit (train)

    def on_record(rec: dict) -> None:
        rec.setdefault("template", templates.get(str(rec["id"])))
        append_record(shard, rec)
        stats["prompts"] += 1
        stats["labels"] += len(rec["labels"])
        stats["important"] += sum(lab[1] for lab in rec["labels"])
        for k in COST_KEYS:
            stats[k] += rec["cost"].get(k, 0)
        now = summarize(stats | {"seconds": time.perf_counter() - t0})
        bar.update()
        bar.set_postfix_str(f"{stats['labels']} labels, {now['labels_per_minute']:.1f}/min, "
                            f"{now['unimportant_share']:.0%} unimportant, {now['wasted_share']:.0%} wasted")

    deadline = None if max_minutes is None else t0 + 60 * max_minutes

    def until_deadline():
        for item in todo:
            if deadline is not None and time.perf_counter() > deadline:
                return
            yield item

    miner.mine_many(until_deadline(), on_record)
    bar.close()
    stats["seconds"], stats["cpu_seconds"] = time.perf_counter() - t0, time.process_time() - cpu0
    if comm is not None:
        all_stats = comm.gather(stats, root=0)
        comm.Barrier()
        if rank == 0:
            merge_shards(out, size, ids)
            stats = {k: sum(s[k] for s in all_stats) for k in stats} | {"seconds": max(s["seconds"] for s in all_stats)}
        stats = comm.bcast(stats, root=0)
    return summarize(stats)


def merge_shards(out: Path, size: int, order: Sequence[str]) -> None:
    """Rank 0: merged output = earlier merged records + every shard, in prompt order (records of
    prompts this run did not list, e.g. from a larger earlier run, after them), written atomically."""
    by_id = {str(r["id"]): r for r in read_records(out, warn=False)[0]}
    for r in range(size):
        by_id.update({str(rec["id"]): rec for rec in read_records(shard_path(out, r, size))[0]})
    listed = [pid for pid in order if pid in by_id]
    seen = set(listed)
    unlisted = [pid for pid in by_id if pid not in seen]
    tmp = out.with_name(out.name + ".merging")
    with open(tmp, "w", encoding="utf-8") as f:
        for pid in listed + unlisted:
            f.write(json.dumps(by_id[pid], separators=(",", ":")) + "\n")
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, out)
