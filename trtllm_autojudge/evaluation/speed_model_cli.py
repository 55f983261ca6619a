"""`trtllm-autojudge speed-model`: the speedup of lossless and AutoJudge against r, the target forward
counted in draft steps, from measured tokens per forward at each window (:mod:`.speed_model`).

    trtllm-autojudge speed-model \\
        --bench 16:out/bench_k16.json --bench 32:out/bench_k32.json --bench 64:out/bench_k64.json \\
        --window 16:out/report16/summary.json:judge@0.08 --window 32:out/report32/summary.json:judge@0.1 \\
        --out docs/results/speed_model_program.json --plot docs/img/speed_model_program.png

1. Each ``--bench`` run (``bench --k K`` on a chain, all in one dtype and thread count) timed its
   questions' prefills, and a draft step, a target step and a verify of K + 1 tokens between its
   questions (``measured``), after a prefix as long as a typical prompt and half a response.
2. It checks the model against each run: the tokens/s it predicts from that run's tokens per forward,
   tokens per question and step costs, against the tokens/s that run measured. The model is trusted for other r only
   where it is within 10% at every K. This CPU's r is the median of the runs' target step over draft
   step.
3. From the tokens per forward of each ``--window`` (an ``eval`` summary: its lossless row and the
   AutoJudge row SPEC, e.g. a certified report set; default: the bench runs' own), it gives the
   speedup over target-only and over lossless against r (each question's prefill one target forward,
   with the tokens per question of the bench at that K), marks this CPU's measured r and the r of
   offloaded targets computed from stated figures (``modelled``), and plots it.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np

from .speed_model import (OFFLOAD_REGIMES, StepCosts, parse_offload, predicted_target_only_tokens_per_s,
                          predicted_tokens_per_s, regime_table, speedup_over_target)

TOLERANCE = 0.10  # the model is trusted where it predicts every bench run's tokens/s within this


def parse_windowed(text: str, what: str, parts: int) -> list[str]:
    """``K:PATH[:SPEC]`` split, K checked."""
    fields = text.split(":", parts - 1)
    if len(fields) < 2 or not fields[0].isdigit() or int(fields[0]) < 1:
        raise argparse.ArgumentTypeError(f"{what} takes K:PATH{':SPEC' if parts > 2 else ''} with K a window of 1 or "
                                         f"more, got {text!r}")
    return fields


def window_taus(path: str, spec: str | None) -> dict[str, float]:
    """Tokens per forward of lossless and of the AutoJudge row ``spec`` in an eval summary."""
    rows = {r["spec"]: r for r in json.loads(Path(path).read_text())["rows"]}
    judged = [s for s in rows if s.startswith("judge")]
    if spec is None:
        if len(judged) != 1:
            raise SystemExit(f"speed-model: {path} holds the judge rows {judged}: name one, --window K:{path}:SPEC")
        spec = judged[0]
    if spec not in rows or "lossless" not in rows:
        raise SystemExit(f"speed-model: {path} has no row {spec!r} beside lossless (rows: {sorted(rows)})")
    return {"lossless": rows["lossless"]["tokens_per_cycle"], "autojudge": rows[spec]["tokens_per_cycle"],
            "autojudge_spec": spec, "questions": rows[spec]["questions"],
            "tokens_per_question": {"lossless": rows["lossless"]["new_tokens"] / rows["lossless"]["questions"],
                                    "autojudge": rows[spec]["new_tokens"] / rows[spec]["questions"]}}


def bench_costs(k: int, path: str, bench: dict) -> StepCosts:
    """The step costs a bench run timed between its questions, for its own window."""
    if not bench.get("step_costs"):
        raise SystemExit(f"speed-model: {path} (K = {k}) holds no step costs: rerun `bench --k {k}` with this version, "
                         f"on a chain drafted by a model, so it times the steps between its questions")
    costs = StepCosts.from_dict(bench["step_costs"])
    if k not in costs.verify_s:
        raise SystemExit(f"speed-model: {path} timed verifies for K = {sorted(costs.verify_s)}, not {k}: give it as "
                         f"--bench {next(iter(costs.verify_s))}:{path}")
    return costs


def validate(benches: dict[int, dict], costs: dict[int, StepCosts]) -> dict:
    """Per bench run, against its own step costs: measured and predicted tokens/s of each mode, and
    the relative error."""
    out = {}
    for k, bench in sorted(benches.items()):
        rows = {}
        for mode in ("lossless", "autojudge"):
            med = bench["medians"][mode]
            predicted = predicted_tokens_per_s(med["tokens_per_forward"], k, costs[k], med["tokens_per_question"])
            rows[mode] = {"tokens_per_forward": med["tokens_per_forward"], "measured_tokens_per_s": med["tokens_per_s"],
                          "predicted_tokens_per_s": predicted, "error": predicted / med["tokens_per_s"] - 1}
        target_only = bench["medians"]["target-only"]
        predicted = predicted_target_only_tokens_per_s(costs[k], target_only["tokens_per_question"])
        rows["target-only"] = {"measured_tokens_per_s": target_only["tokens_per_s"], "predicted_tokens_per_s": predicted,
                               "error": predicted / target_only["tokens_per_s"] - 1}
        out[str(k)] = rows
    return out


def plot(taus: dict[int, dict], cpu_r: float, regimes, path: Path) -> Path:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    r = np.logspace(0, 3.3, 200)
    fig, ax = plt.subplots(figsize=(8, 5))
    colors = dict(zip(sorted(taus), plt.rcParams["axes.prop_cycle"].by_key()["color"]))
    for k, by_mode in sorted(taus.items()):
        n = by_mode["tokens_per_question"]
        ax.plot(r, speedup_over_target(by_mode["lossless"], k, r, n["lossless"]), "--", color=colors[k],
                label=f"lossless, K = {k}")
        ax.plot(r, speedup_over_target(by_mode["autojudge"], k, r, n["autojudge"]), "-", color=colors[k],
                label=f"AutoJudge ({by_mode['autojudge_spec']}), K = {k}")
    ax.axvline(cpu_r, color="grey", lw=1)
    low, high = ax.get_ylim()
    ax.text(cpu_r, low + 0.02 * (high - low), " this CPU (measured)", rotation=90, va="bottom", fontsize=8)
    for regime in regimes:
        ax.axvline(regime.r, color="black", lw=0.8, ls=":")
        ax.text(regime.r, ax.get_ylim()[1] * 0.97, f" {regime.name} (modelled)", rotation=90, va="top", fontsize=7)
    ax.set_xscale("log")
    ax.set_xlabel("r = target forward / draft step")
    ax.set_ylabel("speedup over target-only decoding")
    ax.set_title("speed model: tokens per forward (measured) x cycle cost (r)")
    ax.legend(fontsize=7, loc="upper left")
    ax.grid(alpha=0.3, which="both")
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path


def main(argv: list[str]) -> int:
    p = argparse.ArgumentParser(prog="trtllm-autojudge speed-model", description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bench", action="append", default=[], type=lambda t: parse_windowed(t, "--bench", 2),
                   metavar="K:BENCH.json", help="a `bench --k K --out BENCH.json` run, checked against the model "
                                                "(repeatable; at least one)")
    p.add_argument("--window", action="append", default=[], type=lambda t: parse_windowed(t, "--window", 3),
                   metavar="K:SUMMARY.json[:SPEC]", help="tokens per forward at window K from an eval summary: its "
                                                         "lossless row and the judge row SPEC (repeatable; default: "
                                                         "the bench runs')")
    p.add_argument("--offload", action="append", default=[], metavar="NAME:WEIGHT_GB:LINK_GB_S:DRAFT_MS",
                   help="another offloaded regime to mark (modelled); two for the paper's 8B/1B pair are built in")
    p.add_argument("--out", type=Path, required=True, help="the result as JSON")
    p.add_argument("--plot", type=Path, default=None, help="speedup against r, as PNG")
    args = p.parse_args(argv)
    if not args.bench:
        p.error("give at least one --bench K:BENCH.json: the model is checked against measured tokens/s first")
    try:
        regimes = [*OFFLOAD_REGIMES, *(parse_offload(t) for t in args.offload)]
    except ValueError as e:
        p.error(str(e))
    paths = {int(k): path for k, path in args.bench}
    benches = {k: json.loads(Path(path).read_text()) for k, path in paths.items()}
    for field in ("dtype", "threads"):
        seen = {k: bench.get(field) for k, bench in benches.items()}
        if len(set(seen.values())) > 1:
            raise SystemExit(f"speed-model: the bench runs differ in {field} ({seen}): run them all with the same "
                             f"--{field}, so their step costs time the same forwards")
    costs = {k: bench_costs(k, paths[k], bench) for k, bench in benches.items()}
    checks = validate(benches, costs)
    trusted = all(abs(row["error"]) <= TOLERANCE for rows in checks.values() for row in rows.values())
    taus = {k: {"lossless": b["medians"]["lossless"]["tokens_per_forward"],
                "autojudge": b["medians"]["autojudge"]["tokens_per_forward"], "autojudge_spec": f"judge@{b['threshold']:g}, bench",
                "questions": b["questions"],
                "tokens_per_question": {m: b["medians"][m]["tokens_per_question"] for m in ("lossless", "autojudge")}}
            for k, b in benches.items()}
    taus.update({int(w[0]): window_taus(w[1], w[2] if len(w) > 2 else None) for w in args.window})
    cpu_r = float(np.median([c.target_step_s / c.draft_step_s for c in costs.values()]))
    numeric = {k: {m: v for m, v in t.items() if m in ("lossless", "autojudge")} for k, t in taus.items()}
    tokens = {k: t["tokens_per_question"] for k, t in taus.items()}
    first = next(iter(benches.values()))
    result = {"step_costs": {str(k): {**c.as_dict(), "source": benches[k]["step_costs"]["source"]}
                             for k, c in sorted(costs.items())},
              "dtype": first.get("dtype"), "threads": first.get("threads"),
              "validation": checks, "tolerance": TOLERANCE, "trusted": trusted,
              "tokens_per_forward": {str(k): v for k, v in sorted(taus.items())},
              "cpu": {"source": "measured: target step / draft step, the median over the bench runs", **regime_table(numeric, cpu_r, tokens)},
              "regimes": [{"name": g.name, "source": g.source, "target_forward_s": g.target_forward_s,
                           "draft_step_s": g.draft_step_s, **regime_table(numeric, g.r, tokens)} for g in regimes],
              "command": shlex.join(["trtllm-autojudge", "speed-model", *argv])}
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=1) + "\n")
    for k, c in sorted(costs.items()):
        print(f"K = {k} bench, step costs (measured between its questions, {c.samples} samples): draft "
              f"{1e3 * c.draft_step_s:.1f} ms, target {1e3 * c.target_step_s:.1f} ms, verify {1e3 * c.verify_s[k]:.1f} ms, "
              f"prefill target {1e3 * c.prefill_target_s:.0f} ms, draft {1e3 * c.prefill_draft_s:.0f} ms")
    print(f"this CPU's r (median over the runs) = {cpu_r:.2f}")
    print(f"{'K':>3} {'mode':<12}{'tok/fwd':>8}{'measured tok/s':>16}{'model tok/s':>13}{'error':>8}")
    for k, rows in checks.items():
        for mode, row in rows.items():
            per_forward = row.get("tokens_per_forward")
            print(f"{k:>3} {mode:<12}{'-' if per_forward is None else f'{per_forward:.2f}':>8}"
                  f"{row['measured_tokens_per_s']:>16.2f}{row['predicted_tokens_per_s']:>13.2f}{row['error']:>8.1%}")
    print(("the model is within" if trusted else "the model is NOT within") + f" {TOLERANCE:.0%} of every bench run"
          + ("" if trusted else ": do not trust it for other r before finding what it misses"))
    for name, table in [("this CPU (measured)", result["cpu"])] + [(f"{g['name']} (modelled)", g) for g in result["regimes"]]:
        print(f"\nr = {table['r']:.1f}: {name}; best lossless window K = {table['best_lossless_window']}")
        for k, row in table["windows"].items():
            print(f"  K = {k:>2}: lossless {row['lossless_over_target_only']:.2f}x, AutoJudge "
                  f"{row['autojudge_over_target_only']:.2f}x target-only; AutoJudge {row['autojudge_over_lossless']:.3f}x "
                  f"lossless at K = {k}, {row['autojudge_over_best_lossless_window']:.3f}x the best lossless window")
    if args.plot:
        print(f"wrote {plot(taus, cpu_r, regimes, args.plot)}")
    print(f"wrote {args.out}", file=sys.stderr)
    return 0
