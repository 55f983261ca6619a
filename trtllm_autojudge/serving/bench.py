"""Benchmark the CPU route served by a real Triton server against the in-process CPU runtime.

    python -m trtllm_autojudge.serving.bench --questions 20 --out docs/results/serving_cpu.json

On held-out questions of the task (:meth:`trtllm_autojudge.tasks.Task.demo_problems`), for lossless
(threshold 0) and the judge at its own threshold, each as ``trtllm-autojudge generate --task T --k K
--mode lossless|judge`` runs it:

- one client, side by side: per question the in-process run (:func:`..decoding.speculative.speculative_generate`
  on the pair loaded as ``generate`` loads it) and the served one (HTTP ``generate``), in alternating
  order so that both see the same load; whether tokens and answers are identical; tokens/s of each
  (tokens over the seconds of the runs) and their ratio; the served requests' p50/p95 latency;
- ``--clients`` at once: the same questions through that many client threads; p50/p95 latency, total
  tokens/s (tokens over the wall time) and how many outputs differ from the one-client outputs (at one
  client the total tokens/s is the served tokens/s: one request at a time).
"""
from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from ..decoding.modes import JudgeRule
from ..decoding.speculative import speculative_generate
from ..decoding.tree import DraftTree
from ..judge.head import JudgeHead
from ..models.loading import load_pair
from ..tasks import load_task
from ..trt.triton.cpu import CPU_MODELS, ReferencePair, make_cpu_repository, resolve_pair
from .client import ask_http
from .install import find_triton
from .server import Ports, TritonServer, free_port


def answer_of(task, text: str, question: str):
    try:
        return task.checker.answer(text, {"question": question})
    except ValueError as e:
        return f"unchecked: {e}"


def percentiles(seconds: list[float]) -> dict:
    return {"p50_s": float(np.percentile(seconds, 50)), "p95_s": float(np.percentile(seconds, 95))}


def side_by_side(runtime, server: TritonServer, questions: list[str], threshold: float, k: int,
                 max_tokens: int) -> dict:
    """One client: each question in process and served, alternating which goes first."""
    target, draft, tokenizer, task, rule = runtime
    rows = []
    for i, q in enumerate(questions):
        def local():
            start = time.perf_counter()
            out = speculative_generate(target, draft, task.prompt_ids(tokenizer, q), tree=DraftTree.chain(k),
                                       rule=rule, max_new_tokens=max_tokens, tokenizer=tokenizer)
            return out, time.perf_counter() - start

        def served():
            return ask_http(server.http_url, q, max_tokens=max_tokens, threshold=threshold, num_draft_tokens=k)

        if i % 2:
            answer = served()
            out, seconds = local()
        else:
            out, seconds = local()
            answer = served()
        rows.append({"question": q, "tokens": len(out.tokens), "in_process_s": seconds, "served_s": answer.seconds,
                     "identical_tokens": answer.tokens == out.tokens,
                     "identical_answer": answer_of(task, answer.text, q) == answer_of(task, out.text, q),
                     "served_tokens": answer.tokens})
    local_tps = sum(r["tokens"] for r in rows) / sum(r["in_process_s"] for r in rows)
    served_tps = sum(len(r["served_tokens"]) for r in rows) / sum(r["served_s"] for r in rows)
    return {"in_process_tokens_per_s": local_tps, "served_tokens_per_s": served_tps,
            "served_over_in_process": served_tps / local_tps,
            "identical_tokens": sum(r["identical_tokens"] for r in rows),
            "identical_answers": sum(r["identical_answer"] for r in rows), "questions": len(rows),
            "latency_1_client": percentiles([r["served_s"] for r in rows]), "rows": rows}


def concurrent(server: TritonServer, questions: list[str], threshold: float, k: int, max_tokens: int,
               clients: int) -> tuple[dict, list[list[int]]]:
    """``clients`` threads asking the questions at once; returns the summary and each question's tokens."""
    results: dict[int, object] = {}
    todo = list(range(len(questions)))
    lock = threading.Lock()

    def worker():
        while True:
            with lock:
                if not todo:
                    return
                i = todo.pop(0)
            results[i] = ask_http(server.http_url, questions[i], max_tokens=max_tokens, threshold=threshold,
                                  num_draft_tokens=k)

    start = time.perf_counter()
    threads = [threading.Thread(target=worker) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - start
    answers = [results[i] for i in range(len(questions))]
    return ({"clients": clients, "wall_s": wall, "total_tokens_per_s": sum(len(a.tokens) for a in answers) / wall,
             "latency": percentiles([a.seconds for a in answers])}, [a.tokens for a in answers])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m trtllm_autojudge.serving.bench", description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="gsm8k-program")
    p.add_argument("--questions", type=int, default=20, help="held-out questions (default 20)")
    p.add_argument("--k", type=int, default=16, help="draft tokens per cycle (num_draft_tokens; generate --k)")
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--clients", type=int, default=4, help="concurrent clients of the second phase")
    p.add_argument("--threads", type=int, default=None, help="torch threads, in process and of each stand-in")
    p.add_argument("--modes", default="lossless,judge", help="lossless, judge (the judge's own threshold), or both")
    p.add_argument("--out", default=None, help="write the results as JSON here (after each mode)")
    args = p.parse_args(argv)
    task = load_task(args.task)
    questions = [pr.question for pr in task.demo_problems(args.questions)[0]]
    pair = ReferencePair(task=args.task, threads=args.threads)
    judge_file, _, _ = resolve_pair(pair, None, args.k)
    head = JudgeHead.load(judge_file)
    target, draft, tokenizer = load_pair(pair.args(), task)
    modes = {}
    result = {"command": "python -m trtllm_autojudge.serving.bench " + " ".join(argv or sys.argv[1:]),
              "task": args.task, "k": args.k, "max_tokens": args.max_tokens, "questions": len(questions),
              "pair": "embedded (target tuned, draft embedded)", "judge": judge_file.name, "modes": modes}
    points = {"lossless": ("lossless", 0.0, None),
              "judge": (f"judge@{head.threshold:g}", head.threshold, JudgeRule.at_default(head))}
    work = Path(tempfile.mkdtemp(prefix="autojudge-bench-"))
    make_cpu_repository(work / "repo", pair, max_draft_tokens=args.k, bls_instances=args.clients)
    server = TritonServer(find_triton(), work / "repo", work, Ports(free_port(), free_port(), free_port()))
    server.start()
    finished = False
    try:
        server.wait_ready(CPU_MODELS, timeout=1800)
        for name, threshold, rule in (points[m] for m in args.modes.split(",")):
            one = side_by_side((target, draft, tokenizer, task, rule), server, questions, threshold, args.k,
                               args.max_tokens)
            modes[name] = {"one_client": one}
            write(result, args.out)
            summary, tokens = concurrent(server, questions, threshold, args.k, args.max_tokens, args.clients)
            summary["differ_from_1_client"] = sum(t != r["served_tokens"] for t, r in zip(tokens, one["rows"]))
            modes[name]["concurrent"] = summary
            write(result, args.out)
            print(report_line(name, one, summary), flush=True)
        finished = True
    finally:
        server.stop()
        if finished:
            shutil.rmtree(work, ignore_errors=True)
        else:
            print(f"the benchmark did not finish; the server's log stays in {server.log_path}", file=sys.stderr)
    return 0


def write(result: dict, out: str | None) -> None:
    """The results so far as JSON (the served tokens left out)."""
    if out:
        text = json.dumps(result, indent=1, default=lambda o: None)
        clean = json.loads(text)
        for mode in clean["modes"].values():
            for row in mode["one_client"]["rows"]:
                row.pop("served_tokens")
        Path(out).write_text(json.dumps(clean, indent=1) + "\n")


def report_line(name: str, one: dict, many: dict) -> str:
    return (f"{name}: identical tokens {one['identical_tokens']}/{one['questions']}, answers "
            f"{one['identical_answers']}/{one['questions']}; tokens/s in process {one['in_process_tokens_per_s']:.1f}, "
            f"served {one['served_tokens_per_s']:.1f} ({one['served_over_in_process']:.2f}x); latency p50/p95 1 client "
            f"{one['latency_1_client']['p50_s']:.1f}/{one['latency_1_client']['p95_s']:.1f} s, {many['clients']} clients "
            f"{many['latency']['p50_s']:.1f}/{many['latency']['p95_s']:.1f} s; total tokens/s {many['clients']} clients "
            f"{many['total_tokens_per_s']:.1f}; outputs differing from 1 client {many['differ_from_1_client']}")


if __name__ == "__main__":
    sys.exit(main())
