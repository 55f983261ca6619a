"""Helpers shared by the AutoJudge Triton models (runs inside Triton only)."""
from __future__ import annotations

import json

import numpy as np
import triton_python_backend_utils as pb_utils


def model_parameters(args: dict) -> dict[str, str]:
    """The ``parameters`` of this model's config.pbtxt as plain strings."""
    config = json.loads(args["model_config"])
    return {k: v["string_value"] for k, v in config.get("parameters", {}).items()}


def input_array(request, name: str, default=None) -> np.ndarray | None:
    tensor = pb_utils.get_input_tensor_by_name(request, name)
    return default if tensor is None else tensor.as_numpy()


def output_array(response, name: str) -> np.ndarray:
    tensor = pb_utils.get_output_tensor_by_name(response, name)
    if tensor is None:
        raise pb_utils.TritonModelException(f"the response has no output {name!r}")
    if tensor.is_cpu():
        return tensor.as_numpy()
    from torch.utils.dlpack import from_dlpack

    return from_dlpack(tensor.to_dlpack()).cpu().numpy()


def call(model_name: str, inputs: dict[str, np.ndarray], outputs: list[str], request_id: str = ""):
    """One non-decoupled BLS request (Triton request id ``request_id``); raises with the callee's
    message on error."""
    request = pb_utils.InferenceRequest(model_name=model_name, inputs=[pb_utils.Tensor(k, v) for k, v in inputs.items()],
                                        requested_output_names=outputs, request_id=request_id)
    response = request.exec()
    if response.has_error():
        raise pb_utils.TritonModelException(f"{model_name}: {response.error().message()}")
    return response


class CacheGauges:
    """Two gauges on Triton's metrics endpoint for a stand-in's per-request KV caches
    (:class:`trtllm_autojudge.trt.triton.stand_ins.SessionCache`): the requests holding one and the
    tokens they hold, labelled with the model's name."""

    def __init__(self, model_name: str):
        labels = {"model": model_name}
        # a Metric works only while its MetricFamily lives: keep both
        self.families = [pb_utils.MetricFamily(name=f"autojudge_kv_cached_{what}", description=description,
                                               kind=pb_utils.MetricFamily.GAUGE)
                         for what, description in (("requests", "requests whose KV cache a CPU stand-in keeps"),
                                                   ("tokens", "KV cache entries a CPU stand-in keeps, over its requests"))]
        self.requests, self.tokens = (family.Metric(labels=labels) for family in self.families)

    def update(self, cache) -> None:
        self.requests.set(len(cache.sequences))
        self.tokens.set(cache.cached_tokens)

    def close(self) -> None:
        """Drop the metrics before their families (the other order crashes the stub at exit)."""
        del self.requests, self.tokens
        self.families.clear()
