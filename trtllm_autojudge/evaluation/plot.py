"""The frontier plot: answer agreement with the lossless run against tokens per target forward."""
from __future__ import annotations

import textwrap
from pathlib import Path

COLORS = {"lossless": "black", "judge": "tab:red", "topk": "tab:blue", "typical": "tab:green",
          "mtp": "tab:purple", "oracle": "tab:orange"}
LABELS = {"lossless": "lossless", "judge": "AutoJudge", "topk": "top-K", "typical": "typical acceptance",
          "mtp": "MTP relaxed", "oracle": "oracle (mined labels)"}


def _short(params: str) -> str:
    """'0.428893' -> '0.429' (annotations stay readable); non-numbers pass through."""
    try:
        return ",".join(f"{float(p):.3g}" for p in params.split(","))
    except ValueError:
        return params


def plot_frontier(rows: list[dict], path: str | Path, title: str = "", min_agreement: float | None = None) -> Path:
    """One curve per method (points sorted by tokens per cycle); returns the PNG path.

    ``min_agreement``: a dashed line at the lowest agreement a budget allows (``calibrate``)."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.5, 4.8), dpi=120)
    ax = fig.add_subplot()
    for method in COLORS:
        pts = sorted((r["tokens_per_cycle"], r["agreement"], r["params"]) for r in rows if r["method"] == method)
        if not pts:
            continue
        xs, ys, params = zip(*pts)
        ax.plot(xs, ys, "o-" if len(pts) > 1 else "s", color=COLORS[method], label=LABELS[method], ms=5)
        if method in ("judge", "topk"):
            for x, y, prm in zip(xs, ys, params):
                if prm:
                    ax.annotate(_short(prm), (x, y), textcoords="offset points", xytext=(3, -10), fontsize=7, color=COLORS[method])
    if min_agreement is not None:
        ax.axhline(min_agreement, color="gray", ls="--", lw=1, label=f"answer budget ({min_agreement:.0%} kept)")
    ax.set_xlabel("tokens per target forward (accepted draft tokens + 1)")
    ax.set_ylabel("final answers equal to the lossless run")
    ax.set_ylim(min([0.5] + [r["agreement"] - 0.05 for r in rows] + [(min_agreement or 1) - 0.05]), 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="center left", bbox_to_anchor=(1.02, 0.5))
    ax.set_title(textwrap.fill(title or "accuracy / speed frontier", 90), fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    return Path(path)


FRONTIER_X = {  # the x of a frontier row: (the axis label, how to compute it from the row)
    "bound": ("95% upper bound on the share of answers changed (Clopper-Pearson)",
              lambda r: r["answer_change_bound"]),
    "share": ("share of answers changed against lossless (observed)", lambda r: r["answers_changed"] / r["questions"]),
}


def frontier_x(rows: list[dict], x: str) -> list[float]:
    """The x of each summary row: ``bound`` (its certificate) or ``share`` (the share it changed)."""
    if x not in FRONTIER_X:
        raise ValueError(f"x must be one of {sorted(FRONTIER_X)}, got {x!r}")
    return [FRONTIER_X[x][1](r) for r in rows]


def plot_certified_frontier(series: dict[str, list[dict]], path: str | Path, budget: float | None = None,
                            title: str = "", x: str = "bound", goal: float | None = None) -> Path:
    """Gain against certificate: for each named judge (a lever tried), one curve of its summary rows
    over thresholds, x = the one-sided 95% upper bound on the share of answers changed (``x="bound"``)
    or the share itself (``x="share"``), y = tokens per target forward against lossless (with its
    interval as an error bar); ``budget``: a dashed vertical line at the largest bound a user
    accepts (``x="share"``: the largest observed share its certificate allows); ``goal``: a dotted horizontal line at a gain aimed for. Rows that did not run every
    question (calibrate's early stop past the budget) are hollow markers, unjoined: their x is over
    the questions they ran."""
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib.figure import Figure

    fig = Figure(figsize=(8.5, 5.6), dpi=120)
    ax = fig.add_subplot()
    if len(series) > 20:
        raise ValueError(f"{len(series)} curves in one plot: give at most 20, so that no two share a colour")
    paired = matplotlib.colormaps["tab20"].colors  # ten hues, each dark then light
    colors = paired[0::2] + paired[1::2]  # no colour twice; ten hues before any light one
    for color, (name, rows) in zip(colors, series.items()):
        full = max((r["questions"] for r in rows), default=0)
        whole = [r for r in rows if r["questions"] == full]
        pts = sorted((at, r["vs_lossless"], r["vs_lossless_lo"], r["vs_lossless_hi"])
                     for at, r in zip(frontier_x(whole, x), whole))
        if not pts:
            continue
        xs, ys, los, his = zip(*pts)
        err = [[y - lo for y, lo in zip(ys, los)], [hi - y for y, hi in zip(ys, his)]]
        ax.errorbar(xs, ys, yerr=err, fmt="o-", ms=4, capsize=2, color=color, label=f"{name} ({full} questions)")
        cut = [r for r in rows if r["questions"] < full]
        if cut:
            ax.plot(frontier_x(cut, x), [r["vs_lossless"] for r in cut], "o", ms=6, mfc="none", color=color)
    if budget is not None:
        what = "answer budget" if x == "bound" else "share a certificate allows"
        ax.axvline(budget, color="gray", ls="--", lw=1, label=f"{what} ({budget:.1%})")
    if goal is not None:
        ax.axhline(goal, color="gray", ls=":", lw=1, label=f"goal ({goal:.2f}x)")
    from matplotlib.ticker import PercentFormatter

    ax.xaxis.set_major_formatter(PercentFormatter(1.0))
    ax.set_xlabel(FRONTIER_X[x][0])
    ax.set_ylabel("tokens per target forward / lossless's")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2)  # below the axes: off the points
    ax.set_title(textwrap.fill(title or "gain against certificate", 90), fontsize=9)
    fig.tight_layout()
    fig.savefig(path)
    return Path(path)
