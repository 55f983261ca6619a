"""The per-request settings of ``autojudge_bls``, read from its request tensors and checked against the
repository's limits, with errors that name the input, its value and the limit.

Inputs (the BLS config, :func:`.config.repository_configs`): ``max_tokens`` (tokens to generate, at
least 1), optional ``threshold`` (the judge's, in [0, 1]; 0 = lossless; default the judge file's),
or ``answer_budget`` (a share of answers changed: the threshold the judge's certificate proves
within it, for a chain of the request's ``num_draft_tokens``; :mod:`...judge.ladder`),
``num_draft_tokens`` (D, 1..the engine's longest path; default that), ``draft_width`` (W, default 1)
and ``stream`` (one response per cycle; a decoupled BLS only).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np

from ...judge.ladder import certified_window, threshold_within
from ..engine.io_spec import EngineBlock
from ..runner.packing import chain_tree


@dataclass(frozen=True)
class RequestSettings:
    max_tokens: int
    threshold: float
    depth: int  # D: num_draft_tokens
    width: int  # W: draft_width
    stream: bool


def _scalar(read: Callable[[str], np.ndarray | None], name: str, default=None):
    value = read(name)
    if value is None:
        if default is None:
            raise ValueError(f"the request lacks the input {name!r}")
        return default
    value = np.asarray(value).reshape(-1)
    if value.size != 1:
        raise ValueError(f"input {name!r} must hold one value, got {value.size}")
    return value[0].item()


def budget_threshold(certificate: dict | None, budget: float, depth: int, width: int) -> float:
    """The threshold the judge's certificate (its metadata dict; None: it has none) proves within the
    answer ``budget`` for a chain of ``depth`` draft tokens; ValueError naming what it certifies."""
    if not (math.isfinite(budget) and 0.0 < budget < 1.0):
        raise ValueError(f"answer_budget is a share of answers changed: give a number in (0, 1), got {budget}")
    if certificate is None:
        raise ValueError("answer_budget: the served judge has no certificate, so no threshold is certified within "
                         "any budget; give threshold instead")
    if width != 1 or certificate.get("tree") is not None or certificate.get("k") != depth:
        raise ValueError(f"answer_budget: the judge's certificate holds for {certified_window(certificate)}, and this "
                         f"request drafts num_draft_tokens {depth} with draft_width {width}: ask for "
                         f"num_draft_tokens {certificate.get('k')} (draft_width 1), or give threshold")
    return threshold_within(certificate, budget)


def read_settings(read: Callable[[str], np.ndarray | None], block: EngineBlock, default_threshold: float,
                  decoupled: bool, certificate: dict | None = None) -> RequestSettings:
    """Settings of one request; ``read(name)`` gives an input's array, or None when it is absent;
    ``certificate``: the served judge's (its metadata dict), which ``answer_budget`` reads."""
    max_tokens = int(_scalar(read, "max_tokens"))
    if max_tokens < 1:
        raise ValueError(f"max_tokens must be at least 1, got {max_tokens}")
    threshold = float(_scalar(read, "threshold", default_threshold))
    if not (math.isfinite(threshold) and 0.0 <= threshold <= 1.0):
        raise ValueError(f"threshold must lie in [0, 1] (0 = lossless, judge off), got {threshold}")
    budget = read("answer_budget")
    if budget is not None and read("threshold") is not None:
        raise ValueError("threshold and answer_budget both set the judge's threshold: give one")
    max_depth = block.max_path_len - 1
    depth = int(_scalar(read, "num_draft_tokens", max_depth))
    width = int(_scalar(read, "draft_width", 1))
    if not 1 <= depth <= max_depth:
        raise ValueError(f"num_draft_tokens must lie in 1..{max_depth} (the engine's longest path), got {depth}")
    if width < 1:
        raise ValueError(f"draft_width must be at least 1, got {width}")
    tree = chain_tree(depth, width)
    if tree.num_nodes > block.max_draft_nodes or len(tree.paths) > block.max_paths:
        raise ValueError(f"num_draft_tokens {depth} with draft_width {width} makes {tree.num_nodes} draft nodes on "
                         f"{len(tree.paths)} paths; the engine takes at most {block.max_draft_nodes} nodes on "
                         f"{block.max_paths} paths")
    if budget is not None:
        threshold = budget_threshold(certificate, float(_scalar(read, "answer_budget")), depth, width)
    stream = bool(_scalar(read, "stream", False))
    if stream and not decoupled:
        raise ValueError("stream needs a decoupled autojudge_bls (model_transaction_policy decoupled: true): ask "
                         "without stream, or serve the CPU route's repository")
    return RequestSettings(max_tokens, threshold, depth, width, stream)


def check_context(prompt_tokens: int, settings: RequestSettings, max_seq_len: int | None) -> None:
    """Refuse a request whose prompt, answer and last draft cannot fit the target's context
    (``max_seq_len`` None: the engine does not say; it is checked there)."""
    if prompt_tokens == 0:
        raise ValueError("text_input is empty: give a prompt of at least one token")
    needed = prompt_tokens + settings.max_tokens + settings.depth
    if max_seq_len is not None and needed > max_seq_len:
        raise ValueError(f"text_input is {prompt_tokens} tokens; with max_tokens {settings.max_tokens} and "
                         f"num_draft_tokens {settings.depth} the request needs {needed} positions, and the target's "
                         f"context holds {max_seq_len}: shorten the prompt or lower max_tokens")
