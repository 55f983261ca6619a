"""Triton model ``autojudge_target``: one verification cycle on the AutoJudge target engine.

Inputs/outputs: :data:`trtllm_autojudge.trt.triton_io.CYCLE_TENSORS` ->
:data:`~trtllm_autojudge.trt.triton_io.ACCEPTANCE_TENSORS`. The engine runs through
``tensorrt_llm.runtime.Session`` (:class:`trtllm_autojudge.backends.trtllm_runner.EngineTargetVerifier`)
on this instance's GPU; the engine must be built with ``--tp_size 1``.
"""
import triton_python_backend_utils as pb_utils

from trtllm_autojudge.backends.trtllm_runner import EngineTargetVerifier
from trtllm_autojudge.trt.triton_io import CYCLE_TENSORS, acceptance_to_tensors, tensors_to_cycle
from trtllm_autojudge.trt.triton_models._common import input_array, model_parameters


class TritonPythonModel:
    def initialize(self, args):
        self.verifier = EngineTargetVerifier(model_parameters(args)["engine_dir"], rank=0)

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                cycle = tensors_to_cycle({name: input_array(request, name) for name in CYCLE_TENSORS})
                outputs = acceptance_to_tensors(self.verifier.verify(cycle))
                responses.append(pb_utils.InferenceResponse(
                    output_tensors=[pb_utils.Tensor(k, v) for k, v in outputs.items()]))
            except Exception as e:  # report per request; Triton keeps serving the others
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))))
        return responses
