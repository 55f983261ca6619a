"""The ``AutoJudgeAccept`` TensorRT plugin contract (plugins/README.md), as data and checks.

Pure Python: nothing here imports TensorRT. :mod:`.network` turns these checked values into
TensorRT calls; the tests check them here.

Accept mode (``output_mode = 0``), inputs in this order (``B`` sequences, ``N`` draft nodes,
``P`` paths, ``D+1 = max_path_len``):

==  ================  ======================  =============================================
 #  name              shape                   meaning
==  ================  ======================  =============================================
 0  target_logits     [B*(N+1), V]            target's logits with node n as the last input
 1  target_hidden     [B*(N+1), Ht]           target's final-norm hidden state, same rows
 2  draft_tokens      [B, N] int32            token of node n at column n-1
 3  draft_lens        [B] int32               nodes 1..draft_lens[b] are valid
 4  paths             [B, P, D+1] int32       root-to-leaf node indices, -1 padded
 5  threshold         [B] float32             per-request threshold in [0, 1]
 6  draft_hidden      [B*(N+1), Hd]           draft's final-norm hidden state (blocks DD, DD1)
 7  greedy_child      [B, N+1] int32          rank-0 child of each node, -1 none (blocks DT1,
                                              DT2, DD1, LS); input 6 without draft_hidden
==  ================  ======================  =============================================

Outputs: ``accepted_tokens [B, D+1]``, ``accepted_lens [B]``, ``best_path [B]``,
``judged_count [B]`` (int32), with the meaning of :mod:`trtllm_autojudge.spec.acceptance`.

Logits mode (``output_mode = 1``), the stock engine tensors of one packed step (``L`` logits rows,
``T`` tokens, ``S`` sequences; the rule is :mod:`trtllm_autojudge.spec.packed_step`):

==  ====================  ==============  ===============================================
 #  name                  shape           meaning
==  ====================  ==============  ===============================================
 0  target_logits         [L, V]          the LM head's output rows
 1  target_hidden         [L, Ht]         the LM head's input rows (final-norm states)
 2  input_ids             [T] int32       the step's packed input ids
 3  last_token_ids        [L] int32       1-based position of each row's token
 4  host_request_types    [S] int32       host memory: 0 context, 1 generation
 5  host_context_lengths  [S] int32       host memory: a context request's tokens
 6  draft_hidden          [L, Hd]         blocks DD, DD1 (no stock runtime feeds it)
==  ====================  ==============  ===============================================

Output: ``rewritten_logits [L, V]`` of ``target_logits``' type. A sequence's draft rows are a chain:
the lookahead blocks of a draft row read the sequence's next draft rows (no greedy_child input).

Tree logits mode (``output_mode = 2``), the tensors of one TensorRT-LLM 1.2 EAGLE engine step at
``EagleForCausalLM._eagle_fwd_helper`` (request b owns ``draft_lens[b] + 1`` logits rows after those of
the requests before it; the rule is :mod:`trtllm_autojudge.spec.tree_step`; target-only judges):

==  ================  ======================  =============================================
 #  name              shape                   meaning
==  ================  ======================  =============================================
 0  target_logits     [L, V]                  ``lm_logits``
 1  target_hidden     [L, Ht]                 the LM head's input rows
 2  draft_tokens      [B, N] int32            the engine input ``draft_tokens``
 3  draft_lens        [B] int32               ``draft_lens`` (0 for a context request)
 4  paths             [B, N+1, D+1] int32     ``draft_paths``
 5  threshold         [B] float32             ``posterior_threshold``: per-request threshold
 6  greedy_child      [B, N+1] int32          the static tree's rank-0 children (DT1, DT2, LS)
==  ================  ======================  =============================================

Output: ``rewritten_logits [L, V]``, for the stock ``EagleSampleAndAcceptDraftTokens``.

``feature_blocks`` holds the judge's blocks as :data:`trtllm_autojudge.spec.judge_blocks.BLOCK_CODES`
codes, in the order of its weights. Field sets of the first contract named the setup with
``feature_setup`` (0 = DT, 1 = DD-DT) instead; :func:`check_plugin_fields` migrates them, and the
plugin itself still accepts them (it serializes ``feature_blocks``). ``min_run`` is the judge's
minimum run (``accept_core.h``: a mismatching node whose exact run is shorter is never judged); a
field set without it (exported before it existed) means 1, no minimum, here and in the plugin.
"""
from __future__ import annotations

from typing import Mapping, Sequence

import numpy as np

from ...spec.judge_blocks import block_codes, block_setup, feature_size, reads_draft, window_tokens

PLUGIN_NAME = "AutoJudgeAccept"
PLUGIN_VERSION = "1"
PLUGIN_NAMESPACE = "autojudge"
INIT_FUNCTION = "initAutoJudgePlugins"  # extern "C" bool initAutoJudgePlugins(void* logger, char const* ns)
LIBRARY_NAME = "libautojudge_trt_plugin.so"

# Field name -> NumPy dtype, in the order the fields are handed to the creator.
FIELD_DTYPES: dict[str, type] = {
    "judge_weight": np.float32,  # [F] folded weights w = coef / scale
    "judge_bias": np.float32,  # [1] folded bias c
    "feature_blocks": np.int32,  # [K] the judge's blocks (spec/judge_blocks.py BLOCK_CODES), weight order
    "target_hidden": np.int32,  # [1] Ht
    "draft_hidden": np.int32,  # [1] Hd, 0 when no block reads the draft
    "max_path_len": np.int32,  # [1] D+1
    "output_mode": np.int32,  # [1] OUTPUT_MODES
    "threshold": np.float32,  # [1] default threshold (the logits mode uses it)
    "min_run": np.int32,  # [1] the judge's minimum run (JudgeHead.min_run), 1 = none
}
# trt.PluginFieldType member per NumPy dtype.
TRT_FIELD_TYPES = {np.dtype(np.float32): "FLOAT32", np.dtype(np.int32): "INT32"}
LEGACY_FEATURE_SETUPS = {0: "DT", 1: "DD-DT"}  # feature_setup of the first contract's field sets
OUTPUT_MODES = {"accept": 0, "logits": 1, "tree_logits": 2}

ACCEPT_INPUTS = ("target_logits", "target_hidden", "draft_tokens", "draft_lens", "paths", "threshold", "draft_hidden",
                 "greedy_child")
ACCEPT_OUTPUTS = ("accepted_tokens", "accepted_lens", "best_path", "judged_count")
LOGITS_INPUTS = ("target_logits", "target_hidden", "input_ids", "last_token_ids", "host_request_types",
                 "host_context_lengths", "draft_hidden")
LOGITS_OUTPUTS = ("rewritten_logits",)
TREE_LOGITS_INPUTS = ("target_logits", "target_hidden", "draft_tokens", "draft_lens", "paths", "threshold",
                      "greedy_child")
LAYER_NAME = "autojudge_accept"


def check_plugin_fields(fields: Mapping[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Validate a complete field set and return it with the contract's dtypes and shapes; a field set
    of the first contract (``feature_setup`` instead of ``feature_blocks``) comes back migrated.

    Raises ValueError naming the field and what to change.
    """
    fields = dict(fields)
    if "feature_setup" in fields and "feature_blocks" not in fields:
        setup = int(np.asarray(fields.pop("feature_setup")).reshape(-1)[0])
        if setup not in LEGACY_FEATURE_SETUPS:
            raise ValueError(f"feature_setup {setup} is not one of {LEGACY_FEATURE_SETUPS}: give feature_blocks "
                             f"instead")
        fields["feature_blocks"] = block_codes(LEGACY_FEATURE_SETUPS[setup])
    fields.setdefault("min_run", np.array([1], np.int32))
    missing = [k for k in FIELD_DTYPES if k not in fields]
    extra = [k for k in fields if k not in FIELD_DTYPES]
    if missing or extra:
        raise ValueError(f"plugin fields: missing {missing}, unknown {extra}; the contract has {list(FIELD_DTYPES)}")
    out: dict[str, np.ndarray] = {}
    for name, dtype in FIELD_DTYPES.items():
        a = np.asarray(fields[name])
        if a.dtype.kind not in "fiu":
            raise ValueError(f"plugin field {name} must be numeric, got dtype {a.dtype}")
        cast = a.astype(dtype).reshape(-1)
        if dtype is np.int32 and not np.array_equal(cast.astype(np.float64), a.reshape(-1).astype(np.float64)):
            raise ValueError(f"plugin field {name} must hold integers that fit int32, got {a}")
        out[name] = np.ascontiguousarray(cast)
    for name in FIELD_DTYPES:
        if name not in ("judge_weight", "feature_blocks") and out[name].shape != (1,):
            raise ValueError(f"plugin field {name} must hold one value, got shape {out[name].shape}")
    w = out["judge_weight"]
    if w.size == 0 or not np.all(np.isfinite(w)) or not np.isfinite(out["judge_bias"][0]):
        raise ValueError("plugin fields judge_weight / judge_bias must be non-empty and finite")
    setup = block_setup(out["feature_blocks"])
    ht, hd = int(out["target_hidden"][0]), int(out["draft_hidden"][0])
    if ht < 1 or hd < 0 or reads_draft(setup) != (hd > 0):
        raise ValueError(f"target_hidden {ht} / draft_hidden {hd} do not fit feature_blocks {setup}: draft_hidden is "
                         f"the draft's hidden size when a block reads the draft (DD, DD1), else 0")
    if w.size != feature_size(setup, ht, hd):
        raise ValueError(f"judge_weight has {w.size} features, feature_blocks {setup} with target_hidden {ht} and "
                         f"draft_hidden {hd} need {feature_size(setup, ht, hd)}: the judge file does not match these "
                         f"hidden sizes")
    if int(out["max_path_len"][0]) < 2:
        raise ValueError(f"max_path_len (D+1) must be >= 2 (at least one draft token), got {out['max_path_len'][0]}")
    if int(out["output_mode"][0]) not in OUTPUT_MODES.values():
        raise ValueError(f"output_mode {out['output_mode'][0]} is not one of {OUTPUT_MODES}")
    if int(out["output_mode"][0]) == OUTPUT_MODES["tree_logits"] and reads_draft(setup):
        raise ValueError(f"feature_blocks {setup} read the draft's hidden states, which an EAGLE engine step does not "
                         f"have: output_mode tree_logits runs target-only judges (DT, DT1, DT2, LS)")
    if not 0.0 <= float(out["threshold"][0]) <= 1.0:
        raise ValueError(f"threshold {out['threshold'][0]} must lie in [0, 1]")
    if int(out["min_run"][0]) < 1:
        raise ValueError(f"min_run {out['min_run'][0]} must be >= 1 (the judge's minimum run, 1 = none): export the "
                         f"fields again from the judge file")
    return out


def plugin_field_specs(fields: Mapping[str, np.ndarray]) -> list[tuple[str, np.ndarray, str]]:
    """``(name, data, trt.PluginFieldType member name)`` per field, in contract order."""
    checked = check_plugin_fields(fields)
    return [(name, checked[name], TRT_FIELD_TYPES[checked[name].dtype]) for name in FIELD_DTYPES]


def accept_input_names(feature_blocks: Sequence[int]) -> tuple[str, ...]:
    """Names of the accept-mode inputs, in plugin order, for a judge's block codes: the six, then
    ``draft_hidden`` when a block reads the draft, then ``greedy_child`` when one looks ahead."""
    setup = block_setup(feature_blocks)
    return tuple(name for name in ACCEPT_INPUTS if (name != "draft_hidden" or reads_draft(setup))
                 and (name != "greedy_child" or window_tokens(setup) > 0))


def logits_input_names(feature_blocks: Sequence[int]) -> tuple[str, ...]:
    """Names of the logits-mode inputs, in plugin order, for a judge's block codes: the six stock
    inputs, then ``draft_hidden`` when a block reads the draft."""
    return LOGITS_INPUTS if reads_draft(block_setup(feature_blocks)) else LOGITS_INPUTS[:-1]


def tree_logits_input_names(feature_blocks: Sequence[int]) -> tuple[str, ...]:
    """Names of the tree-logits-mode inputs, in plugin order: the six, then ``greedy_child`` when a block
    looks ahead."""
    return TREE_LOGITS_INPUTS if window_tokens(block_setup(feature_blocks)) > 0 else TREE_LOGITS_INPUTS[:-1]


def plugin_io_names(fields: Mapping[str, np.ndarray]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(inputs, outputs)`` of the plugin these fields configure, in plugin order."""
    f = check_plugin_fields(fields)
    mode = int(f["output_mode"][0])
    if mode == OUTPUT_MODES["accept"]:
        return accept_input_names(f["feature_blocks"]), ACCEPT_OUTPUTS
    if mode == OUTPUT_MODES["tree_logits"]:
        return tree_logits_input_names(f["feature_blocks"]), LOGITS_OUTPUTS
    return logits_input_names(f["feature_blocks"]), LOGITS_OUTPUTS


def check_plugin_input_shapes(shapes: Mapping[str, Sequence[int]], fields: Mapping[str, np.ndarray]) -> None:
    """The shape check of the mode these fields configure (-1 is a dynamic dimension)."""
    f = check_plugin_fields(fields)
    mode = int(f["output_mode"][0])
    if mode == OUTPUT_MODES["accept"]:
        check_accept_input_shapes(shapes, f)
    elif mode == OUTPUT_MODES["tree_logits"]:
        check_tree_logits_input_shapes(shapes, f)
    else:
        check_logits_input_shapes(shapes, f)


def _shape_checker(shapes: Mapping[str, Sequence[int]], names: tuple[str, ...], ranks: Mapping[str, int], mode: str):
    if set(shapes) != set(names):
        raise ValueError(f"{mode}-mode inputs must be {list(names)}, got {list(shapes)}")
    s = {k: tuple(int(d) for d in v) for k, v in shapes.items()}
    for name in names:
        if len(s[name]) != ranks[name]:
            raise ValueError(f"input {name} must have rank {ranks[name]}, got shape {s[name]}")

    def same(a: int, b: int, what: str) -> None:
        if a >= 0 and b >= 0 and a != b:
            raise ValueError(f"shape mismatch: {what} ({a} != {b})")

    return s, same


def check_logits_input_shapes(shapes: Mapping[str, Sequence[int]], fields: Mapping[str, np.ndarray]) -> None:
    """Check logits-mode input shapes against each other and the fields; -1 is a dynamic dimension.

    Raises ValueError naming the input whose shape is wrong.
    """
    f = check_plugin_fields(fields)
    names = logits_input_names(f["feature_blocks"])
    ranks = {"target_logits": 2, "target_hidden": 2, "input_ids": 1, "last_token_ids": 1, "host_request_types": 1,
             "host_context_lengths": 1, "draft_hidden": 2}
    s, same = _shape_checker(shapes, names, ranks, "logits")
    L = s["target_logits"][0]
    for name in ("target_hidden", "last_token_ids") + (("draft_hidden",) if "draft_hidden" in s else ()):
        same(s[name][0], L, f"{name} must have one entry per logits row (L = target_logits rows)")
    same(s["target_hidden"][1], int(f["target_hidden"][0]), "target_hidden width vs field target_hidden")
    if "draft_hidden" in s:
        same(s["draft_hidden"][1], int(f["draft_hidden"][0]), "draft_hidden width vs field draft_hidden")
    same(s["host_context_lengths"][0], s["host_request_types"][0], "host_context_lengths must be [S] like "
         "host_request_types")


def _check_tree_shapes(s: Mapping[str, Sequence[int]], same, f: Mapping[str, np.ndarray]) -> None:
    """The tree inputs of accept and tree logits modes: draft_lens, threshold [B], paths [B, P, D+1],
    greedy_child [B, N+1] (when given), with draft_tokens [B, N]."""
    B, N = s["draft_tokens"]
    for name in ("draft_lens", "threshold"):
        same(s[name][0], B, f"{name} must be [B]")
    same(s["paths"][0], B, "paths must be [B, P, D+1]")
    same(s["paths"][2], int(f["max_path_len"][0]), "paths last dimension vs field max_path_len (D+1)")
    if "greedy_child" in s:
        same(s["greedy_child"][0], B, "greedy_child must be [B, N+1]")
        same(s["greedy_child"][1], N + 1 if N >= 0 else -1, "greedy_child must be [B, N+1], one entry per node")


def check_accept_input_shapes(shapes: Mapping[str, Sequence[int]], fields: Mapping[str, np.ndarray]) -> None:
    """Check accept-mode input shapes against each other and the fields; -1 is a dynamic dimension.

    Raises ValueError naming the input whose shape is wrong.
    """
    f = check_plugin_fields(fields)
    names = accept_input_names(f["feature_blocks"])
    ranks = {"target_logits": 2, "target_hidden": 2, "draft_tokens": 2, "draft_lens": 1, "paths": 3, "threshold": 1,
             "draft_hidden": 2, "greedy_child": 2}
    s, same = _shape_checker(shapes, names, ranks, "accept")
    B, N = s["draft_tokens"]
    rows = B * (N + 1) if B >= 0 and N >= 0 else -1
    for name in ("target_logits", "target_hidden") + (("draft_hidden",) if "draft_hidden" in s else ()):
        same(s[name][0], rows, f"{name} rows must be B*(N+1) with draft_tokens [B, N] = {s['draft_tokens']}")
    same(s["target_hidden"][1], int(f["target_hidden"][0]), "target_hidden width vs field target_hidden")
    if "draft_hidden" in s:
        same(s["draft_hidden"][1], int(f["draft_hidden"][0]), "draft_hidden width vs field draft_hidden")
    _check_tree_shapes(s, same, f)


def check_tree_logits_input_shapes(shapes: Mapping[str, Sequence[int]], fields: Mapping[str, np.ndarray]) -> None:
    """Check tree-logits-mode input shapes against each other and the fields; -1 is a dynamic dimension.

    Raises ValueError naming the input whose shape is wrong.
    """
    f = check_plugin_fields(fields)
    names = tree_logits_input_names(f["feature_blocks"])
    ranks = {"target_logits": 2, "target_hidden": 2, "draft_tokens": 2, "draft_lens": 1, "paths": 3, "threshold": 1,
             "greedy_child": 2}
    s, same = _shape_checker(shapes, names, ranks, "tree_logits")
    same(s["target_hidden"][0], s["target_logits"][0], "target_hidden must have one row per logits row")
    same(s["target_hidden"][1], int(f["target_hidden"][0]), "target_hidden width vs field target_hidden")
    _check_tree_shapes(s, same, f)
