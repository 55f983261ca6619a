"""Triton model ``autojudge_target``: one verification cycle on the AutoJudge target engine.

Inputs/outputs: :data:`trtllm_autojudge.trt.triton.tensors.CYCLE_TENSORS` (``greedy_child`` only
for a lookahead judge) -> :data:`~trtllm_autojudge.trt.triton.tensors.ACCEPTANCE_TENSORS`. The engine runs through
``tensorrt_llm.runtime.Session`` (:class:`trtllm_autojudge.trt.runner.engines.EngineTargetVerifier`)
on this instance's GPU, or, for an engine built with ``--tp_size N > 1``, on N MPI ranks this model
spawns (:class:`trtllm_autojudge.trt.runner.tp_pool.SpawnedTargetPool`; start tritonserver under
``mpirun -n 1``).
"""
import json
from pathlib import Path

import triton_python_backend_utils as pb_utils

from trtllm_autojudge.trt.runner.engines import EngineTargetVerifier
from trtllm_autojudge.trt.runner.tp_pool import SpawnedTargetPool
from trtllm_autojudge.trt.triton.models._common import input_array, model_parameters
from trtllm_autojudge.trt.triton.tensors import CYCLE_TENSORS, acceptance_to_tensors, tensors_to_cycle


class TritonPythonModel:
    def initialize(self, args):
        params = model_parameters(args)
        engine_dir, share = params["engine_dir"], float(params.get("gpu_weights_percent", "1"))
        config = json.loads((Path(engine_dir) / "config.json").read_text())
        world = int(config["pretrained_config"]["mapping"]["world_size"])
        if world > 1:
            self.verifier = SpawnedTargetPool(world, "trtllm_autojudge.trt.runner.tp_pool:engine_verifier",
                                              {"engine_dir": engine_dir, "gpu_weights_percent": share})
        else:
            self.verifier = EngineTargetVerifier(engine_dir, rank=0, gpu_weights_percent=share)

    def finalize(self):
        if isinstance(self.verifier, SpawnedTargetPool):
            self.verifier.close()

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
