"""Triton model ``autojudge_target`` of the CPU route: the target and the judge on the reference
runtime, behind the cycle and acceptance tensors (:mod:`trtllm_autojudge.trt.triton.cpu`).

Inputs/outputs: :data:`trtllm_autojudge.trt.triton.tensors.CYCLE_TENSORS` (one request per cycle, as
the BLS sends them) -> :data:`~trtllm_autojudge.trt.triton.tensors.ACCEPTANCE_TENSORS`. The request's
KV cache is kept under its Triton request id
(:class:`trtllm_autojudge.trt.triton.stand_ins.CachedTargetEngine`); ``stop`` [1] true frees it and
verifies nothing.
"""
import numpy as np
import triton_python_backend_utils as pb_utils

from trtllm_autojudge.judge.head import JudgeHead
from trtllm_autojudge.trt.engine.io_spec import EngineBlock
from trtllm_autojudge.trt.triton.cpu import load_stand_in_model
from trtllm_autojudge.trt.triton.models._common import CacheGauges, input_array, model_parameters
from trtllm_autojudge.trt.triton.stand_ins import CachedTargetEngine
from trtllm_autojudge.trt.triton.tensors import (ACCEPTANCE_TENSORS, CYCLE_TENSORS, STOP_TENSOR, acceptance_to_tensors,
                                                 tensors_to_cycle)


class TritonPythonModel:
    def initialize(self, args):
        config, target = load_stand_in_model(model_parameters(args)["engine_dir"], "target")
        head = JudgeHead.load(EngineBlock.from_engine_config(config).judge_file)
        self.gauges = CacheGauges(args["model_name"])
        self.engine = CachedTargetEngine(target, head)

    def verify(self, request):
        key = request.request_id()
        if bool(input_array(request, STOP_TENSOR[0], np.zeros(1, bool)).reshape(-1).any()):
            self.engine.cache.release(key)
            return {"accepted_tokens": np.zeros((0, 1), np.int32), "accepted_lens": np.zeros(0, np.int32),
                    "best_path": np.zeros(0, np.int32), "judged_count": np.zeros(0, np.int32)}
        cycle = tensors_to_cycle({name: input_array(request, name) for name in CYCLE_TENSORS})
        if cycle.batch != 1:
            raise ValueError(f"the CPU target verifies one request per cycle (the BLS's), got {cycle.batch}")
        return acceptance_to_tensors(self.engine.verify_requests([key], cycle))

    def finalize(self):
        self.gauges.close()

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                outputs = self.verify(request)
                responses.append(pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor(k, outputs[k]) for k in ACCEPTANCE_TENSORS]))
            except Exception as e:  # report per request; Triton keeps serving the others
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))))
        self.gauges.update(self.engine.cache)
        return responses
