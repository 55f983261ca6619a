"""PNG plot of a judge's validation frontier (matplotlib's Agg canvas: no display, no pyplot state)."""
from __future__ import annotations

from pathlib import Path


def plot_frontier(frontier: list[dict[str, float]], path: str | Path, threshold: float | None = None,
                  title: str | None = None) -> Path:
    """Plot harm (important-accept rate) against the fraction of mismatches accepted.

    Parameters
    ----------
    frontier : list of dict
        Rows of :func:`.frontier.sweep_thresholds` (also ``JudgeHead.meta["metrics"]["frontier"]``).
    path : str or Path
        Where the PNG goes.
    threshold : float, optional
        A threshold to mark (the head's default one).
    title : str, optional
        Plot title.
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    x = [100 * r["accept_rate"] for r in frontier]
    fig = Figure(figsize=(6, 4.5))
    FigureCanvasAgg(fig)  # renders to a file; no pyplot state, no display
    ax = fig.subplots()
    ax.plot(x, [100 * r["important_accept_rate"] for r in frontier], ".-", label="important mismatches accepted")
    ax.plot(x, [100 * r["unimportant_accept_rate"] for r in frontier], ".-", label="unimportant mismatches accepted")
    chosen = [r for r in frontier if threshold is not None and r["threshold"] == threshold]
    for r in chosen:
        ax.axvline(100 * r["accept_rate"], color="grey", linestyle="--",
                   label=f"threshold {threshold:.3g}: {100 * r['important_accept_rate']:.2f}% important accepted")
    ax.set_xlabel("validation mismatches accepted (%)")
    ax.set_ylabel("accepted within the class (%)")
    ax.set_title(title or "judge frontier (validation)")
    ax.grid(alpha=0.3)
    ax.legend(loc="upper left", fontsize=8)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=120)
    return path
