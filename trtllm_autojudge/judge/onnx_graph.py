"""ONNX graph of a judge head, built with ``onnx.helper`` and checked with onnxruntime.

Graph (opset 17, float32, the scaler folded in as for the plugin):
  input   features    [M, F]
  output  logit       [M]     = features @ w + c     (Gemm, then Squeeze)
  output  probability [M]     = sigmoid(logit)       (probability of "important")
The head's setup, hidden sizes, default threshold and model identifiers ride along as
``metadata_props``. The check runs the graph on feature rows drawn from the head's own scaler
statistics (``mean + scale * N(0, 1)``) and compares with the NumPy float64 score.
"""
from __future__ import annotations

import json

import numpy as np

from .head import JudgeHead

OPSET = 17
IR_VERSION = 8  # readable by onnxruntime >= 1.10 and TensorRT's ONNX parser
_U32 = 2.0 ** -24  # float32 unit roundoff


def build_onnx(head: JudgeHead):
    """The ``onnx.ModelProto`` computing ``logit`` and ``probability`` of ``features [M, F]``."""
    import onnx
    from onnx import TensorProto, helper, numpy_helper

    w, c = head.folded()
    F = w.shape[0]
    graph = helper.make_graph(
        nodes=[
            helper.make_node("Gemm", ["features", "judge_weight", "judge_bias"], ["logit_2d"], transB=1),
            helper.make_node("Squeeze", ["logit_2d", "squeeze_axes"], ["logit"]),
            helper.make_node("Sigmoid", ["logit"], ["probability"]),
        ],
        name="autojudge_head",
        inputs=[helper.make_tensor_value_info("features", TensorProto.FLOAT, ["M", F])],
        outputs=[helper.make_tensor_value_info("logit", TensorProto.FLOAT, ["M"]),
                 helper.make_tensor_value_info("probability", TensorProto.FLOAT, ["M"])],
        initializer=[
            numpy_helper.from_array(w.reshape(1, F), "judge_weight"),  # [1, F] float32
            numpy_helper.from_array(np.array([c], np.float32), "judge_bias"),  # [1] float32
            numpy_helper.from_array(np.array([1], np.int64), "squeeze_axes"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="trtllm-autojudge")
    model.ir_version = IR_VERSION
    props = {"setup": head.setup, "draft_hidden": head.draft_hidden, "target_hidden": head.target_hidden,
             "threshold": head.threshold, "draft_model": head.meta.get("draft_model"),
             "target_model": head.meta.get("target_model"), "task": head.meta.get("task")}
    helper.set_model_props(model, {k: json.dumps(v) for k, v in props.items()})
    onnx.checker.check_model(model, full_check=True)
    return model


def run_onnx(model, features: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(logit [M], probability [M]) of ``features [M, F]`` under onnxruntime (CPU)."""
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    logit, prob = session.run(["logit", "probability"], {"features": np.ascontiguousarray(features, np.float32)})
    return logit, prob


def check_onnx(model, head: JudgeHead, rows: int = 256, seed: int = 0) -> float:
    """Run ``model`` on ``rows`` feature rows drawn from the head's scaler statistics and compare its
    logits with the NumPy float64 ones; return the max abs difference.

    Raises when a difference exceeds the probabilistic float32 rounding bound of a length-n dot
    product (Higham and Mary, 2019), ``6 * sqrt(n) * u * (sum|w x| + |c|)`` with ``n = F + 1`` and
    ``u = 2**-24``, plus 1e-6: the graph then computes a different function. (Real hidden sizes
    give differences around 1e-5 in the logit; the plugin's float32 dot product has the same.)
    """
    z = np.random.default_rng(seed).standard_normal((rows, head.coef.shape[0]))
    x = (head.mean + head.scale * z).astype(np.float32)  # [rows, F]
    logit, prob = run_onnx(model, x)
    if logit.shape != (rows,) or prob.shape != (rows,):
        raise RuntimeError(f"the ONNX judge graph returned shapes {logit.shape} and {prob.shape} for [{rows}] rows; "
                           f"this is a bug in the export")
    w, c = head.folded()
    terms = x.astype(np.float64) * w  # [rows, F]
    expected = terms.sum(1) + c
    bound = 6 * np.sqrt(w.shape[0] + 1) * _U32 * (np.abs(terms).sum(1) + abs(c)) + 1e-6
    diff = np.abs(logit.astype(np.float64) - expected)
    worst = int(np.argmax(diff / bound))
    if diff[worst] > bound[worst]:
        raise RuntimeError(f"the ONNX judge graph disagrees with NumPy: |logit difference| {diff[worst]:.3g} "
                           f"where float32 rounding allows {bound[worst]:.3g}; this is a bug in the export")
    if np.abs(prob - 1.0 / (1.0 + np.exp(-logit.astype(np.float64)))).max() > 1e-6:
        raise RuntimeError("the ONNX judge graph's probability is not sigmoid(logit); this is a bug in the export")
    return float(diff.max())
