#!/usr/bin/env python3
"""Where does the served CPU route spend its time? Per question, lossless, three timings of the same
decoding: the CPU runtime (`speculative_generate`, as `generate` runs it), the served computation
without a server (the BLS's loop, `engine_generate`, over the two stand-ins in this process:
`trt/triton/stand_ins.py`), and the real server (HTTP `generate`, one BLS instance), with the CPU
seconds each of the server's Python-backend stubs spent on the request (from /proc). Backs
notebook/serving-cpu.md (summed up in docs/serving.md, "Where the served time goes").

    python experiments/serving_profile.py --questions 4 --k 16 --max-tokens 256 --json out/serving_profile.json

With ``--runtime-only`` it times only the runtime (wall and CPU seconds over the questions), so that
fresh processes compare OpenMP settings (the server set ``OMP_WAIT_POLICY=PASSIVE`` for its stubs until
the stand-ins shared the cores among their requests):

    for e in "" OMP_WAIT_POLICY=PASSIVE "OMP_WAIT_POLICY=PASSIVE GOMP_SPINCOUNT=5000"; do
        env $e python experiments/serving_profile.py --questions 4 --runtime-only; done

Nothing else should run meanwhile: the timings are compared side by side.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from trtllm_autojudge.decoding.speculative import speculative_generate  # noqa: E402
from trtllm_autojudge.decoding.tree import DraftTree  # noqa: E402
from trtllm_autojudge.judge.head import JudgeHead  # noqa: E402
from trtllm_autojudge.models.loading import load_pair  # noqa: E402
from trtllm_autojudge.serving.client import ask_http  # noqa: E402
from trtllm_autojudge.serving.install import find_triton  # noqa: E402
from trtllm_autojudge.serving.server import Ports, TritonServer, free_port  # noqa: E402
from trtllm_autojudge.tasks import load_task  # noqa: E402
from trtllm_autojudge.trt.runner.chain_drafter import ChainTreeDrafter  # noqa: E402
from trtllm_autojudge.trt.runner.loop import engine_generate  # noqa: E402
from trtllm_autojudge.trt.triton.cpu import CPU_MODELS, ReferencePair, make_cpu_repository, resolve_pair  # noqa: E402
from trtllm_autojudge.trt.triton.stand_ins import (CachedDraftEngine, CachedTargetEngine, KeyedDraft,  # noqa: E402
                                                   KeyedTarget)


def stub_cpu_seconds(repo: Path) -> dict[str, float]:
    """CPU seconds (user + system) so far of each Python-backend stub serving a model of ``repo``."""
    tick, out = os.sysconf("SC_CLK_TCK"), {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            args = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace").split("\0")
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:  # the process ended while we looked
            continue
        model = next((Path(a).relative_to(repo).parts[0] for a in args if a.startswith(f"{repo}/")), None)
        if model is not None and "triton_python_backend_stub" in args[0]:
            out[model] = out.get(model, 0.0) + (int(fields[11]) + int(fields[12])) / tick
    return out


def timed(fn):
    """(fn(), wall seconds, CPU seconds of this process's threads)."""
    start, cpu = time.perf_counter(), time.process_time()
    out = fn()
    return out, time.perf_counter() - start, time.process_time() - cpu


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--task", default="gsm8k-program")
    p.add_argument("--questions", type=int, default=3, help="held-out questions of the task (default 3)")
    p.add_argument("--k", type=int, default=16)
    p.add_argument("--max-tokens", type=int, default=256)
    p.add_argument("--json", default=None)
    p.add_argument("--runtime-only", action="store_true", help="time the runtime only, under this environment")
    args = p.parse_args()
    task = load_task(args.task)
    questions = [pr.question for pr in task.demo_problems(args.questions)[0]]
    pair = ReferencePair(task=args.task)
    head = JudgeHead.load(resolve_pair(pair, None, args.k)[0])
    target, draft, tokenizer = load_pair(pair.args(), task)
    eos, tree = tokenizer.eos_token_id, DraftTree.chain(args.k)
    draft_engine, target_engine = CachedDraftEngine(draft), CachedTargetEngine(target, head)
    speculative_generate(target, draft, task.prompt_ids(tokenizer, questions[0]), tree=tree, rule=None,
                         max_new_tokens=8, tokenizer=tokenizer)  # warm-up: the first call pays one-off costs
    rows = []
    for i, q in enumerate(questions):
        prompt = task.prompt_ids(tokenizer, q)
        runtime, runtime_s, runtime_cpu_s = timed(lambda: speculative_generate(
            target, draft, prompt, tree=tree, rule=None, max_new_tokens=args.max_tokens, tokenizer=tokenizer))
        rows.append({"runtime_tokens": runtime.tokens, "tokens": len(runtime.tokens), "cycles": len(runtime.cycles),
                     "runtime_s": runtime_s, "runtime_cpu_s": runtime_cpu_s})
        if args.runtime_only:
            continue
        key = f"q{i}"
        (stand_ins,), rows[-1]["stand_ins_s"], _ = timed(lambda: engine_generate(
            ChainTreeDrafter(KeyedDraft(draft_engine, key, eos)), KeyedTarget(target_engine, key), [prompt], tree=tree,
            thresholds=[0.0], max_new_tokens=args.max_tokens, stop_ids=[eos]))
        rows[-1]["stand_ins_identical"] = stand_ins.tokens == runtime.tokens
        draft_engine.cache.release(key)
        target_engine.cache.release(key)
    if args.runtime_only:
        omp = {k: v for k, v in os.environ.items() if k.startswith(("OMP_", "GOMP_"))}
        print(f"runtime under {omp or 'OpenMP defaults'}: {sum(r['runtime_s'] for r in rows):.2f} s wall, "
              f"{sum(r['runtime_cpu_s'] for r in rows):.2f} s CPU, {sum(r['tokens'] for r in rows)} tokens")
        return 0
    work = Path(tempfile.mkdtemp(prefix="autojudge-profile-"))
    repo = (work / "repo").resolve()
    make_cpu_repository(repo, pair, max_draft_tokens=args.k, bls_instances=1)
    server = TritonServer(find_triton(), repo, work, Ports(free_port(), free_port(), free_port()))
    server.start()
    try:
        server.wait_ready(CPU_MODELS, timeout=1800)
        for q, row in zip(questions, rows):
            before = stub_cpu_seconds(repo)
            answer = ask_http(server.http_url, q, max_tokens=args.max_tokens, threshold=0.0, num_draft_tokens=args.k)
            after = stub_cpu_seconds(repo)
            row.update(served_s=answer.seconds, served_identical=answer.tokens == row.pop("runtime_tokens"),
                       stub_cpu_s={m: round(after[m] - before.get(m, 0.0), 2) for m in sorted(after)})
    finally:
        server.stop()
    shutil.rmtree(work, ignore_errors=True)
    print(f"{'tokens':>6} {'runtime s':>9} {'its CPU s':>9} {'stand-ins s':>11} {'served s':>8}  "
          "stubs' CPU s while served")
    for r in rows:
        print(f"{r['tokens']:>6} {r['runtime_s']:>9.2f} {r['runtime_cpu_s']:>9.2f} {r['stand_ins_s']:>11.2f} "
              f"{r['served_s']:>8.2f}  "
              + ", ".join(f"{m} {s:.2f}" for m, s in r["stub_cpu_s"].items() if s))
    total = {k: sum(r[k] for r in rows) for k in ("runtime_s", "stand_ins_s", "served_s")}
    print(f"stand-ins / runtime time {total['stand_ins_s'] / total['runtime_s']:.3f}, served / runtime "
          f"{total['served_s'] / total['runtime_s']:.3f}; identical tokens: stand-ins "
          f"{sum(r['stand_ins_identical'] for r in rows)}/{len(rows)}, served "
          f"{sum(r['served_identical'] for r in rows)}/{len(rows)}")
    if args.json:
        Path(args.json).write_text(json.dumps({"command": " ".join(sys.argv), "k": args.k, "rows": rows,
                                               "totals": total}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
