"""Exports of a judge head: plugin fields, ONNX graph, research-code vLLM ``JudgeConfig`` JSON.

Formats (file names inside ``out_dir``):
- ``plugin``: ``judge_plugin_fields.npz``, the fields of the ``AutoJudgeAccept`` TensorRT plugin
  (plugins/README.md) from :func:`plugin_fields`. Any setup of the blocks that exist while
  decoding (DT, DD, DT1, DT2, DD1, LS: ``spec/judge_blocks.py``), without a token veto, a
  target-confidence gate (``min_target_prob``) or a per-response limit (``max_judged``: the engines
  do not count judged acceptances per response).
- ``onnx``: ``judge_head.onnx`` (:mod:`.onnx_graph`), checked against NumPy with onnxruntime
  before it is written. Any setup. It is the head's logit alone: the rules of the walk (a veto, a
  minimum run, a gate) are the caller's to apply.
- ``vllm``: ``judge_vllm_config.json``, the keyword arguments of the research code's vLLM
  ``JudgeConfig(weights, mean, scale, bias, threshold)`` (see :func:`vllm_judge_config`).
  Setup DT only, as in the research code.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from ..spec.judge_blocks import BLOCK_CODES, block_codes
from .head import JudgeHead

FORMATS = ("plugin", "onnx", "vllm")
FILE_NAMES = {"plugin": "judge_plugin_fields.npz", "onnx": "judge_head.onnx", "vllm": "judge_vllm_config.json"}


def unsupported_reason(head: JudgeHead, fmt: str) -> str | None:
    """Why ``head`` cannot be exported as ``fmt`` (None when it can)."""
    if fmt not in FORMATS:
        raise ValueError(f"unknown export format {fmt!r}; choose from {FORMATS}")
    if fmt == "plugin" and not all(b in BLOCK_CODES for b in head.blocks):
        return (f"the TensorRT plugin computes the blocks {list(BLOCK_CODES)} (those that exist while decoding), "
                f"this judge has setup {head.setup}: train with a setup of those blocks, e.g. --setup "
                f"DD-DT-DT1-DT2-DD1-LS")
    if fmt in ("plugin", "vllm") and head.meta.get("veto"):
        return (f"the {fmt} format has no token veto (classes {head.meta['veto']['classes']}), which this judge's "
                f"certified default relies on; only the Python rule applies it")
    if fmt in ("plugin", "vllm") and head.min_target_prob:
        return (f"the {fmt} format has no target-confidence gate (min_target_prob {head.min_target_prob:g}), which "
                f"this judge's certified default relies on; only the Python rule applies it: use a judge file "
                f"without it (calibrate without --min-target-prob)")
    if fmt in ("plugin", "vllm") and head.meta.get("max_judged") is not None:
        return (f"its default operating point limits a response to {head.meta['max_judged']} judged acceptances "
                f"(max_judged), which the {fmt} format, deciding each cycle on its own, does not apply (only the "
                f"Python rule does): use a judge file without that limit (calibrate without --max-judged)")
    if fmt == "vllm" and head.min_run > 1:
        return (f"its default operating point asks a judged acceptance to open at least {head.min_run} tokens "
                f"(min_run), which the vllm format does not apply (the Python rule and the plugin do): use a judge "
                f"file without it (calibrate without --min-run), or export the plugin fields")
    if fmt == "vllm" and head.setup != "DT":
        return (f"the research code's vLLM JudgeConfig takes setup DT only (the target's hidden state), this judge "
                f"has setup {head.setup}: train with --setup DT")
    return None


def plugin_fields(head: JudgeHead) -> dict[str, np.ndarray]:
    """Fields of the ``AutoJudgeAccept`` plugin for ``head``.

    Returns
    -------
    dict
        ``judge_weight`` [F] float32 (folded ``w = coef / scale``, the blocks' features in the
        setup's order), ``judge_bias`` [1] float32 (folded ``c = intercept - sum(coef * mean /
        scale)``), ``feature_blocks`` [K] int32 (the setup's blocks as
        :data:`trtllm_autojudge.spec.judge_blocks.BLOCK_CODES`), ``target_hidden`` [1] int32,
        ``draft_hidden`` [1] int32 (0 when no block reads the draft), ``threshold`` [1] float32 (the
        default probability threshold; the plugin takes the per-request one as an input), ``min_run``
        [1] int32 (the judge's minimum run, :attr:`.head.JudgeHead.min_run`; 1: none).
    """
    reason = unsupported_reason(head, "plugin")
    if reason:
        raise ValueError(reason)
    w, c = head.folded()
    return {
        "judge_weight": w.astype(np.float32),
        "judge_bias": np.array([c], np.float32),
        "feature_blocks": block_codes(head.setup),
        "target_hidden": np.array([head.target_hidden], np.int32),
        "draft_hidden": np.array([head.draft_hidden if head.needs_draft_hidden else 0], np.int32),
        "threshold": np.array([head.threshold], np.float32),
        "min_run": np.array([head.min_run], np.int32),
    }


def vllm_judge_config(head: JudgeHead) -> dict:
    """The research code's vLLM ``JudgeConfig`` keyword arguments, as JSON-ready lists.

    The research code (garipovroma/autojudge, ``src/train_head_gsm8k.py --convert_to_vllm``) pickles
    ``mean = scaler.mean_``, ``scale = scaler.scale_``, ``weights = coef_[0]`` (NOT folded: the
    weights act on standardised features), ``bias = intercept_`` (an array of one value) and
    ``thresholds`` (the sweep), and ``eval/vllm_gsm8k.py`` builds ``JudgeConfig(weights=, mean=,
    scale=, bias=, threshold=)`` from it, the threshold coming from the command line. The score is
    ``sigmoid(((x - mean) / scale) . weights + bias)``. Here ``threshold`` is the head's default and
    ``thresholds`` the validation frontier's thresholds (empty when the head has no metrics).
    """
    reason = unsupported_reason(head, "vllm")
    if reason:
        raise ValueError(reason)
    frontier = head.meta.get("metrics", {}).get("frontier", [])
    return {
        "weights": head.coef.astype(float).tolist(),  # [Ht]
        "mean": head.mean.astype(float).tolist(),  # [Ht]
        "scale": head.scale.astype(float).tolist(),  # [Ht]
        "bias": [float(head.intercept)],  # [1]
        "threshold": float(head.threshold),
        "thresholds": [float(r["threshold"]) for r in frontier],
    }


def export_judge(head: JudgeHead, out_dir: str | Path, formats: tuple[str, ...] | list[str] | None = None
                 ) -> dict[str, Path]:
    """Write the exports of ``head`` into ``out_dir`` (created if needed).

    Parameters
    ----------
    head : JudgeHead
        The judge to export.
    out_dir : str or Path
        Output folder; files are named by :data:`FILE_NAMES`.
    formats : sequence of str, optional
        Formats to write. Default: every format of :data:`FORMATS` that the head's setup supports
        (see :func:`unsupported_reason` for the others). A format named explicitly that the setup
        does not support raises ``ValueError``.

    Returns
    -------
    dict
        Format name -> written path.
    """
    from .onnx_graph import build_onnx, check_onnx

    if formats is None:
        formats = [f for f in FORMATS if unsupported_reason(head, f) is None]
    else:
        for f in formats:
            reason = unsupported_reason(head, f)
            if reason:
                raise ValueError(f"cannot export format {f}: {reason}")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    written = {}
    for fmt in formats:
        path = out_dir / FILE_NAMES[fmt]
        if fmt == "plugin":
            np.savez(path, **plugin_fields(head))
        elif fmt == "onnx":
            model = build_onnx(head)
            check_onnx(model, head)
            path.write_bytes(model.SerializeToString())
        else:
            path.write_text(json.dumps(vllm_judge_config(head)))
        written[fmt] = path
    return written
