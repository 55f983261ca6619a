#!/usr/bin/env python3
"""Which CPU weight layout runs a target step fastest? One target step and one verify forward in each
layout of a dtype, side by side in one process. Backs notebook/program-first-evals.md, "Wall clock:
`bench`", and docs/cpu.md.

    python experiments/bench_step.py --task gsm8k-program --threads 2 --repeats 40 \\
        --out docs/results/bench_step.json
    python experiments/bench_step.py --task gsm8k-program --dtype float32 --threads 2 --repeats 40 \\
        --out docs/results/bench_step_fp32.json

Layouts (each a copy of the same target), bfloat16:
- ``linear``: transformers' ``nn.Linear`` as loaded;
- ``packed``: every linear's weight laid out once for oneDNN (``kernels/cpu_linear.py``);
- ``stacked``: packed, and each layer's q/k/v and gate/up projections stacked into one matmul each
  (``kernels/sibling_linear.py``): what ``load_pair`` builds.

float32:
- ``linear``: transformers' ``nn.Linear`` (``--cpu-linear torch``);
- ``rows``: the row-invariant kernel up to 8 rows (``kernels/row_linear.py``): what ``load_pair``
  builds by default.

The bf16 layouts give bit-identical logits, the float32 ones logits equal up to rounding (checked
here on a 100-token forward and on one step). Reported: the median wall
time of a one-token step and of a ``K + 1``-token verify after a 100-token prefix, one forward of
each layout in turn so drift hits them alike; the same layout's matmuls alone (every linear once on
a random one-row input); the roofline bound of ``kernels/roofline.py``; and the time to merely read
every weight once (``roofline.read_seconds``), the floor of any kernel.
"""
from __future__ import annotations

import argparse
import copy
import json
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
import torch  # noqa: E402
from torch import nn  # noqa: E402

from trtllm_autojudge.kernels.cpu_linear import PackedLinear, can_pack, pack_linears  # noqa: E402
from trtllm_autojudge.kernels.roofline import copy_bandwidth, read_seconds, weight_bytes  # noqa: E402
from trtllm_autojudge.kernels.row_linear import RowLinear, use_row_linears  # noqa: E402
from trtllm_autojudge.kernels.sibling_linear import SiblingLinear, fuse_siblings  # noqa: E402
from trtllm_autojudge.models.dtype import DTYPES  # noqa: E402
from trtllm_autojudge.models.transformers_backend import TransformersLM  # noqa: E402

LAYOUTS = {torch.bfloat16: ("linear", "packed", "stacked"), torch.float32: ("linear", "rows")}


def layouts(lm, dtype: torch.dtype = torch.bfloat16) -> dict:
    """``{layout: TransformersLM}``: copies of ``lm`` in ``dtype``, in each of its layouts."""
    out = {}
    for name in LAYOUTS[dtype]:
        out[name] = TransformersLM(copy.deepcopy(lm.model).to(dtype), lm.eos_token_ids, f"{lm.name} ({name})")
        if name in ("packed", "stacked"):
            pack_linears(out[name].model)
        if name == "stacked":
            fuse_siblings(out[name].model)
        if name == "rows":
            use_row_linears("rows", out[name].model)
    return out


def measure(lms: dict, prefix: list[int], k: int, repeats: int) -> dict:
    """Median wall ms of a one-token step and a ``k + 1``-token verify per layout, one forward of each
    layout in turn (the order rotated every repeat), each session trimmed back to ``prefix`` after."""
    sessions = {name: lm.session() for name, lm in lms.items()}
    for session in sessions.values():
        session.forward(prefix)
    names = list(lms)
    times = {name: {"step_ms": [], "verify_ms": []} for name in names}
    for r in range(repeats + 1):  # the first warms up
        for name in names[r % len(names):] + names[:r % len(names)]:
            for key, n in (("step_ms", 1), ("verify_ms", k + 1)):
                t0 = time.perf_counter()
                sessions[name].forward([prefix[-1]] * n)
                if r:
                    times[name][key].append(1e3 * (time.perf_counter() - t0))
                sessions[name].retain(len(prefix))
    return {name: {key: statistics.median(v) for key, v in t.items()} for name, t in times.items()}


def matmul_ms(lm, repeats: int) -> float:
    """Median wall ms of every linear of ``lm.model`` once on a random one-row input, in its layout
    (a stacked group computes once for its members): the matmuls of a step without the rest."""
    inputs = {}
    calls = []
    for m in lm.model.modules():
        if isinstance(m, (nn.Linear, PackedLinear, SiblingLinear, RowLinear)):
            key = id(m.group) if isinstance(m, SiblingLinear) else id(m)
            x = inputs.setdefault(key, torch.randn(1, m.in_features, dtype=lm.dtype))  # [1, in]
            calls.append((m, x))
    times = []
    with torch.inference_mode():
        for _ in range(repeats + 1):  # the first warms up
            t0 = time.perf_counter()
            for m, x in calls:
                m(x)
            times.append(1e3 * (time.perf_counter() - t0))
    return statistics.median(times[1:])


def same_logits(lms: dict, prefix: list[int], exact: bool = True) -> bool:
    """The layouts' logits of a forward over ``prefix`` and of one step after it agree: bitwise, or up
    to float32 rounding (``exact=False``)."""
    logits = []
    for lm in lms.values():
        session = lm.session()
        logits.append(torch.cat([session.forward(prefix).logits, session.forward(prefix[-1:]).logits]))
    same = torch.equal if exact else lambda a, b: torch.allclose(a, b, rtol=1e-4, atol=1e-4)
    return all(same(logits[0], other) for other in logits[1:])


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--task", default="gsm8k-program", help="whose shipped adapter the embedded tuned target loads")
    p.add_argument("--target", default="tuned", choices=("tuned", "raw"))
    p.add_argument("--dtype", default="bfloat16", choices=("bfloat16", "float32"), help="whose layouts to compare")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--k", type=int, default=8, help="draft tokens per verify (the verify forwards K + 1)")
    p.add_argument("--repeats", type=int, default=40, help="timed forwards of each kind per layout (median)")
    p.add_argument("--out", type=Path, default=None)
    args = p.parse_args(argv)
    dtype = DTYPES[args.dtype]
    if dtype == torch.bfloat16 and not can_pack(torch.bfloat16, "cpu"):
        raise SystemExit("bench_step --dtype bfloat16 needs a CPU torch build with oneDNN bf16: there is no packed "
                         "layout to compare (give --dtype float32)")
    torch.set_num_threads(args.threads)
    from trtllm_autojudge.models.embedded import load_target
    from trtllm_autojudge.tasks import load_task

    adapter = load_task(args.task).shipped_model_path("adapter") if args.target == "tuned" else None
    lm, _ = load_target(args.target, adapter=adapter)
    lms = layouts(lm, dtype)
    prefix = list(range(1000, 1100))
    identical = same_logits(lms, prefix, exact=dtype == torch.bfloat16)
    times = measure(lms, prefix, args.k, args.repeats)
    for name, lm in lms.items():
        times[name]["matmuls_ms"] = matmul_ms(lm, args.repeats)
    bandwidth = copy_bandwidth()
    shipped = lms[LAYOUTS[dtype][-1]].model  # the layout load_pair builds
    bound_ms = 1e3 * weight_bytes(shipped) / bandwidth
    read_ms = 1e3 * read_seconds(shipped, args.repeats)
    agree = "bit_identical_logits" if dtype == torch.bfloat16 else "logits_equal_up_to_rounding"
    result = {"layouts": times, agree: identical, "dtype": args.dtype, "bound_ms_per_step": bound_ms, "read_weights_ms": read_ms,
              "copy_bandwidth_gb_s": bandwidth / 1e9, "threads": args.threads, "k": args.k,
              "command": "python experiments/bench_step.py " + " ".join(argv if argv is not None else sys.argv[1:])}
    print(f"bound {bound_ms:.1f} ms per step (copy {bandwidth / 1e9:.1f} GB/s, read + write); reading the weights "
          f"once takes {read_ms:.1f} ms ({read_ms / bound_ms:.2f}x the bound); {agree.replace('_', ' ')}: {identical}")
    print(f"{'layout':<8} {'step ms':>8} {'x bound':>8} {f'verify K={args.k} ms':>16} {'in steps':>9} "
          f"{'matmuls ms':>11} {'x bound':>8}")
    for name, t in times.items():
        print(f"{name:<8} {t['step_ms']:8.1f} {t['step_ms'] / bound_ms:8.2f} {t['verify_ms']:16.1f} "
              f"{t['verify_ms'] / t['step_ms']:9.2f} {t['matmuls_ms']:11.1f} {t['matmuls_ms'] / bound_ms:8.2f}")
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if identical else 1


if __name__ == "__main__":
    sys.exit(main())
