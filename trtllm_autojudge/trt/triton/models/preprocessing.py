"""Triton model ``preprocessing``: ``text_input`` [1] (bytes) -> ``input_ids`` [T] int32.

With the parameter ``task`` (a task name, docs/tasks.md) the text is a question, put into the
task's prompt format (:meth:`trtllm_autojudge.tasks.Task.prompt_ids`, what ``trtllm-autojudge
generate`` sends the models); without it the text is the prompt, tokenized as it is.
"""
import numpy as np
import triton_python_backend_utils as pb_utils
from transformers import AutoTokenizer

from trtllm_autojudge.tasks import load_task
from trtllm_autojudge.trt.triton.models._common import input_array, model_parameters


class TritonPythonModel:
    def initialize(self, args):
        params = model_parameters(args)
        self.tokenizer = AutoTokenizer.from_pretrained(params["tokenizer_dir"])
        self.task = load_task(params["task"]) if params.get("task") else None

    def encode(self, text):
        return self.task.prompt_ids(self.tokenizer, text) if self.task else self.tokenizer.encode(text)

    def execute(self, requests):
        responses = []
        for request in requests:
            text = input_array(request, "text_input").reshape(-1)[0].decode("utf-8")
            ids = np.asarray(self.encode(text), np.int32)
            responses.append(pb_utils.InferenceResponse(output_tensors=[pb_utils.Tensor("input_ids", ids)]))
        return responses
