"""Triton model ``preprocessing``: ``text_input`` [1] (bytes) -> ``input_ids`` [T] int32."""
import numpy as np
import triton_python_backend_utils as pb_utils
from transformers import AutoTokenizer

from trtllm_autojudge.trt.triton.models._common import input_array, model_parameters


class TritonPythonModel:
    def initialize(self, args):
        self.tokenizer = AutoTokenizer.from_pretrained(model_parameters(args)["tokenizer_dir"])

    def execute(self, requests):
        responses = []
        for request in requests:
            text = input_array(request, "text_input").reshape(-1)[0].decode("utf-8")
            ids = np.asarray(self.tokenizer.encode(text), np.int32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("input_ids", ids)]))
        return responses
