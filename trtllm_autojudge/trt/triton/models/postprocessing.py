"""Triton model ``postprocessing``: ``tokens`` [T] int32 -> ``text_output`` [1] (bytes)."""
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
            tokens = input_array(request, "tokens").reshape(-1).tolist()
            text = self.tokenizer.decode(tokens, skip_special_tokens=True)
            out = pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_))
            responses.append(pb_utils.InferenceResponse(output_tensors=[out]))
        return responses
