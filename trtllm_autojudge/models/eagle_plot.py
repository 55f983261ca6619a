"""PNG plot of an EAGLE head's held-out alpha per depth as training went (matplotlib's Agg canvas)."""
from __future__ import annotations

from pathlib import Path


def plot_alpha(evaluations: list[dict], path: str | Path, title: str) -> Path:
    """One line per drafting depth: alpha (the share of chains right at depth d among those right up to
    d - 1) at each evaluation's ``step``; ``evaluations`` holds ``{"step", "alpha": [per depth, None
    where no chain got that far]}`` rows (``train_head``'s state)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    fig = Figure(figsize=(6, 4))
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    depths = max((len(e["alpha"]) for e in evaluations), default=0)
    for d in range(depths):
        points = [(e["step"], 100 * e["alpha"][d]) for e in evaluations
                  if d < len(e["alpha"]) and e["alpha"][d] is not None]
        if points:
            ax.plot(*zip(*points), ".-", label=f"depth {d + 1}")
    ax.set_xlabel("training step")
    ax.set_ylabel("held-out alpha (%)")
    ax.set_ylim(0, 100)
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    fig.savefig(str(path), dpi=110)
    return Path(path)
