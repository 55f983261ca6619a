"""Plugin fields for one engine build: the judge file's fields plus the deployment's.

The judge file gives the folded weights, bias, feature blocks, hidden sizes, the default
threshold and the minimum run (:func:`trtllm_autojudge.judge.export.plugin_fields`); the engine build adds the
longest path (``max_path_len = D+1``) and the output mode.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from ...judge.export import plugin_fields
from ...judge.head import JudgeHead
from .contract import OUTPUT_MODES, check_plugin_fields


def engine_plugin_fields(
    judge: JudgeHead | str | Path,
    max_path_len: int,
    output_mode: str = "accept",
    threshold: float | None = None,
    *,
    target_hidden: int | None = None,
    draft_hidden: int | None = None,
) -> dict[str, np.ndarray]:
    """All nine ``AutoJudgeAccept`` fields for an engine.

    Parameters
    ----------
    judge : JudgeHead or path of a judge file
    max_path_len : int
        D+1: draft tokens on the longest path plus the root.
    output_mode : {"accept", "logits"}
    threshold : float, optional
        Default threshold; the judge file's when None.
    target_hidden, draft_hidden : int, optional
        Hidden sizes of the models the engine is built from; a judge trained for other sizes is
        refused with a message saying which.
    """
    if output_mode not in OUTPUT_MODES:
        raise ValueError(f"output_mode {output_mode!r} is not one of {sorted(OUTPUT_MODES)}")
    if isinstance(judge, (str, Path)):
        judge = JudgeHead.load(judge)
    judge.check_models(draft_hidden=draft_hidden if judge.needs_draft_hidden else None, target_hidden=target_hidden)
    fields = dict(plugin_fields(judge))
    fields["max_path_len"] = np.array([max_path_len], np.int32)
    fields["output_mode"] = np.array([OUTPUT_MODES[output_mode]], np.int32)
    if threshold is not None:
        fields["threshold"] = np.array([threshold], np.float32)
    return check_plugin_fields(fields)
