"""Triton model ``tensorrt_llm_draft`` of the CPU route: the draft model on the reference runtime,
behind the tensorrtllm backend's names (:mod:`trtllm_autojudge.trt.triton.cpu`).

Per request row: ``input_ids`` [B, L] (``input_lengths`` [B] valid), ``request_output_len`` [B, 1],
``end_id`` [B], ``runtime_top_k`` [B] (1: greedy, the only drafting the BLS asks for),
``return_generation_logits`` [B] -> ``output_ids`` [B, 1, L + n] (``end_id`` padded),
``sequence_length`` [B, 1] and, when asked, ``generation_logits`` [B, 1, request_output_len, V].
Each request's KV cache is kept under its Triton request id
(:class:`trtllm_autojudge.trt.triton.stand_ins.CachedDraftEngine`); ``stop`` [B] true frees it.
"""
import numpy as np
import triton_python_backend_utils as pb_utils

from trtllm_autojudge.trt.triton.cpu import load_stand_in_model
from trtllm_autojudge.trt.triton.models._common import CacheGauges, input_array, model_parameters
from trtllm_autojudge.trt.triton.stand_ins import CachedDraftEngine
from trtllm_autojudge.trt.triton.tensors import STOP_TENSOR


def row_key(request_id, b, batch):
    return request_id if batch == 1 else f"{request_id}/{b}"


class TritonPythonModel:
    def initialize(self, args):
        _, draft = load_stand_in_model(model_parameters(args)["engine_dir"], "draft")
        self.gauges = CacheGauges(args["model_name"])
        self.engine = CachedDraftEngine(draft)

    def draft(self, request):
        input_ids = input_array(request, "input_ids")  # [B, L]
        lengths = input_array(request, "input_lengths").reshape(-1)  # [B]
        B = input_ids.shape[0]
        stop = input_array(request, STOP_TENSOR[0], np.zeros(B, bool)).reshape(-1)  # [B]
        if stop.any() != stop.all():
            raise ValueError(f"stop must be the same for every row of a request, got {stop.tolist()}")
        if stop.all():
            for b in range(B):
                self.engine.cache.release(row_key(request.request_id(), b, B))
            return [pb_utils.Tensor("output_ids", input_ids[:, None].astype(np.int32)),
                    pb_utils.Tensor("sequence_length", lengths.reshape(B, 1).astype(np.int32))]
        new = input_array(request, "request_output_len").reshape(-1)  # [B]
        end_id = input_array(request, "end_id", np.full(B, -1, np.int32)).reshape(-1)  # [B]: -1 never stops
        top_k = input_array(request, "runtime_top_k", np.ones(B, np.int32)).reshape(-1)  # [B]
        want_logits = bool(input_array(request, "return_generation_logits", np.zeros(B, bool)).reshape(-1).any())
        if (top_k != 1).any():
            raise ValueError(f"runtime_top_k must be 1: the CPU draft drafts greedily, got {top_k.tolist()}")
        outs = [self.engine.generate(row_key(request.request_id(), b, B), input_ids[b, :lengths[b]].tolist(),
                                     int(new[b]), int(end_id[b]), want_logits) for b in range(B)]
        output_ids = np.full((B, 1, int(lengths.max()) + int(new.max())), int(end_id[0]), np.int32)  # [B, 1, S]
        for b, out in enumerate(outs):
            row = input_ids[b, :lengths[b]].tolist() + out.tokens
            output_ids[b, 0, :len(row)] = row
        tensors = [pb_utils.Tensor("output_ids", output_ids),
                   pb_utils.Tensor("sequence_length",
                                   np.asarray([[lengths[b] + len(o.tokens)] for b, o in enumerate(outs)], np.int32))]
        if want_logits:
            logits = np.zeros((B, 1, int(new.max()), self.engine.vocab_size), np.float32)  # [B, 1, D, V]
            for b, out in enumerate(outs):
                logits[b, 0, :len(out.logits)] = out.logits
            tensors.append(pb_utils.Tensor("generation_logits", logits))
        return tensors

    def finalize(self):
        self.gauges.close()

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                responses.append(pb_utils.InferenceResponse(output_tensors=self.draft(request)))
            except Exception as e:  # report per request; Triton keeps serving the others
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))))
        self.gauges.update(self.engine.cache)
        return responses
