"""Median latency of the acceptance kernels and their bandwidth against a device-to-device copy
measured in the same run (part of tests/gpu/run_all.sh).

Accept mode: bf16 logits and hidden states, vocab 128256, chains of K = 16, Ht = 4096 (DT),
batch 1 to 256. Logits mode: packed steps of 8 and 64 requests (up to 8 draft tokens each). The
fused lookahead judge: every block (DD-DT-DT1-DT2-DD1-LS, the lookahead judge) against DD-DT
(Hd = 2048) at batch 1, 8 and 64, the same chains; target (issue 46): at most 10 % slower.
Each time is the median over 10 replays of a CUDA graph holding 20 calls (CUDA events), divided
by 20. Bandwidth: bytes the kernels must move (accept mode reads the logits and hidden states;
logits mode reads and writes the logits) over the time; the copy reference moves the same number
of bytes (read + write) with ``Tensor.copy_``. Targets (issue 6): at most 10 us per call at batch
<= 8, at least 70 % of copy bandwidth at batch 64.

``--smoke`` times small cases on the CPU with perf_counter: it checks this script only.
``--cpu-proxy`` times the lookahead comparison at full size on the CPU, through the C++ host core:
a proxy of the kernels' ratio (the host core is compute-bound, the kernels are meant to be
bandwidth-bound), not a measurement of them.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import gpu_cases as cases  # noqa: E402
from gpu_cases import LOOKAHEAD_SETUP  # noqa: E402
from trtllm_autojudge.ops.torch_ops import accept, rewrite_logits  # noqa: E402

CALLS_PER_GRAPH = 20
REPLAYS = 10


def median_us(fn, device: str) -> float:
    """Median time of one call of ``fn`` in microseconds."""
    if device != "cuda":
        fn()
        samples = []
        for _ in range(REPLAYS):
            start = time.perf_counter()
            fn()
            samples.append((time.perf_counter() - start) * 1e6)
        return statistics.median(samples)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up (and build the extension) outside the capture
        for _ in range(3):
            fn()
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for _ in range(CALLS_PER_GRAPH):
            fn()
    samples = []
    for _ in range(REPLAYS):
        begin, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        begin.record()
        graph.replay()
        end.record()
        end.synchronize()
        samples.append(begin.elapsed_time(end) * 1e3 / CALLS_PER_GRAPH)
    return statistics.median(samples)


def copy_gbps(num_bytes: int, device: str) -> float:
    """Bandwidth (read + write) of a device-to-device copy moving ``num_bytes`` in total."""
    src = torch.empty(num_bytes // 2, dtype=torch.uint8, device=device)
    dst = torch.empty_like(src)
    return 2 * src.numel() / median_us(lambda: dst.copy_(src), device) / 1e3


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--smoke", action="store_true", help="small cases on the CPU (checks this script only)")
    parser.add_argument("--cpu-proxy", action="store_true",
                        help="only the lookahead-vs-DD-DT comparison, full size, on the CPU (host core)")
    args = parser.parse_args(argv)
    device = "cpu" if args.smoke or args.cpu_proxy else "cuda"
    if device == "cuda" and not torch.cuda.is_available():
        print("no CUDA device visible to torch: nothing to time")
        return 1
    if args.cpu_proxy:
        print("device: cpu (host core, a proxy)")
        lookahead_overhead(128256, (1, 8, 64), {}, device)
        return 0
    vocab, hidden = (1000, dict(target_hidden=64)) if args.smoke else (128256, {})
    batches = (1, 2, 8) if args.smoke else (1, 2, 4, 8, 16, 32, 64, 128, 256)
    print(f"device: {torch.cuda.get_device_name() if device == 'cuda' else 'cpu (smoke)'}")
    print("| mode | batch | rows | MB moved | median us | GB/s | copy GB/s | % of copy |")
    print("|---|---|---|---|---|---|---|---|")
    results = {}
    for batch in batches:
        case = cases.accept_case("bench", batch, cases.chain(16), vocab, "bf16", "DT", device, seed=batch, **hidden)
        moved = case.target_logits.numel() * 2 + case.target_hidden.numel() * 2
        us = median_us(lambda: accept(*case.op_args()), device)
        results[batch] = row("accept", batch, case.target_logits.shape[0], moved, us, device)
        del case
    for requests in (8, 64):
        step = cases.packed_step(requests, 8, vocab, "bf16", device, seed=requests, **hidden)
        moved = 2 * step.target_logits.numel() * 2 + step.target_hidden.numel() * 2
        us = median_us(lambda: rewrite_logits(*step.op_args()), device)
        row("logits", requests, step.target_logits.shape[0], moved, us, device)
        del step
    worst_small = max(results[b][0] for b in batches if b <= 8)
    print(f"\ntarget <= 10 us per call at batch <= 8: worst {worst_small:.1f} us -> "
          f"{'met' if worst_small <= 10 else 'NOT met'}")
    if 64 in results:
        share = results[64][1]
        print(f"target >= 70 % of copy bandwidth at batch 64: {share:.0f} % -> {'met' if share >= 70 else 'NOT met'}")
    print()
    lookahead_overhead(vocab, (1, 8) if args.smoke else (1, 8, 64), dict(hidden, draft_hidden=32) if args.smoke else {},
                       device)
    return 0


def lookahead_overhead(vocab: int, batches: tuple[int, ...], hidden: dict, device: str) -> None:
    """The fused lookahead judge against DD-DT, accept mode, bf16, chains of K = 16: a timing line per batch."""
    print(f"| batch | DD-DT us | {LOOKAHEAD_SETUP} us | lookahead / DD-DT |")
    print("|---|---|---|---|")
    worst = 0.0
    for batch in batches:
        times = []
        for setup in ("DD-DT", LOOKAHEAD_SETUP):
            case = cases.accept_case("bench", batch, cases.chain(16), vocab, "bf16", setup, device, seed=batch,
                                     **hidden)
            times.append(median_us(lambda: accept(*case.op_args()), device))
            del case
        worst = max(worst, times[1] / times[0])
        print(f"| {batch} | {times[0]:.1f} | {times[1]:.1f} | {times[1] / times[0]:.2f} |", flush=True)
    print(f"\ntarget: the fused lookahead judge at most 10 % over DD-DT: worst {100 * (worst - 1):+.0f} % -> "
          f"{'met' if worst <= 1.10 else 'NOT met'}")


def row(mode: str, batch: int, rows: int, moved: int, us: float, device: str) -> tuple[float, float]:
    gbps = moved / us / 1e3
    copy = copy_gbps(moved, device)
    print(f"| {mode} | {batch} | {rows} | {moved / 1e6:.1f} | {us:.1f} | {gbps:.0f} | {copy:.0f} | "
          f"{100 * gbps / copy:.0f} |", flush=True)
    return us, 100 * gbps / copy


if __name__ == "__main__":
    sys.exit(main())
