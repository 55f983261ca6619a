"""Triton model ``autojudge_bls``: AutoJudge speculative decoding for one text request.

Each cycle it asks ``tensorrt_llm_draft`` for a chain tree's draft and ``autojudge_target`` for the
judge-gated acceptance, through :func:`trtllm_autojudge.trt.runner.loop.engine_generate` (the same loop
the engine runner uses). Request inputs: ``text_input``, ``max_tokens``, optional ``threshold``
(default: the judge file's), ``num_draft_tokens`` (D, default: the engine's longest path) and
``draft_width`` (W, default 1; W > 1 needs a draft built with ``--gather_generation_logits``).
Outputs: ``text_output``, ``output_ids`` and the per-request metrics ``accepted_lengths`` /
``judged_counts`` (one entry per cycle) and ``cycles``. It serves target-only judges (the stock draft
model returns no hidden states); for a lookahead judge each cycle carries ``greedy_child``.
"""
import json
from pathlib import Path

import numpy as np
import triton_python_backend_utils as pb_utils
from transformers import AutoTokenizer

from trtllm_autojudge.judge.head import JudgeHead
from trtllm_autojudge.trt.engine.io_spec import EngineBlock
from trtllm_autojudge.trt.engine.routes import check_route_judge, route_setups
from trtllm_autojudge.trt.runner.drafts import draft_from_outputs
from trtllm_autojudge.trt.runner.loop import DraftProposal, engine_generate
from trtllm_autojudge.trt.runner.packing import chain_tree, chain_width, tree_from_chain
from trtllm_autojudge.trt.triton.config import check_draft_width
from trtllm_autojudge.trt.triton.tensors import ACCEPTANCE_TENSORS, cycle_to_tensors, tensors_to_acceptance
from trtllm_autojudge.trt.triton.models._common import call, input_array, model_parameters, output_array


class TritonDrafter:
    def __init__(self, model_name, vocab_size, end_id, pad_id):
        self.model_name, self.vocab_size, self.end_id, self.pad_id = model_name, vocab_size, end_id, pad_id

    def propose(self, prefixes, tree, need_hidden):
        if need_hidden:
            raise ValueError(f"the stock draft model gives no hidden states: serve {route_setups('triton-context')}")
        D, W = tree.max_depth, chain_width(tree)
        (prefix,) = prefixes
        response = call(self.model_name, {
            "input_ids": np.asarray([prefix], np.int32),  # [1, L]
            "input_lengths": np.asarray([[len(prefix)]], np.int32),
            "request_output_len": np.asarray([[D]], np.int32),
            "end_id": np.asarray([[self.end_id]], np.int32),
            "pad_id": np.asarray([[self.pad_id]], np.int32),
            "runtime_top_k": np.asarray([[1]], np.int32),
            "return_generation_logits": np.asarray([[W > 1]], np.bool_),
        }, ["output_ids", "sequence_length"] + (["generation_logits"] if W > 1 else []))
        logits = output_array(response, "generation_logits")[:, 0] if W > 1 else None  # [1, D, V]
        chain, topk, valid = draft_from_outputs(prefixes, output_array(response, "output_ids")[:, 0],
                                                output_array(response, "sequence_length")[:, 0], logits, D, W,
                                                self.vocab_size, self.end_id)
        node_tokens, draft_lens = tree_from_chain(chain, topk, valid, tree)
        return DraftProposal(node_tokens, draft_lens, None, forwards=D)


class TritonVerifier:
    needs_draft_hidden = False

    def __init__(self, model_name, needs_greedy_child):
        self.model_name = model_name
        self.needs_greedy_child = needs_greedy_child  # a lookahead judge: the cycles carry greedy_child

    def verify(self, cycle):
        response = call(self.model_name, cycle_to_tensors(cycle), list(ACCEPTANCE_TENSORS))
        return tensors_to_acceptance({name: output_array(response, name) for name in ACCEPTANCE_TENSORS})


class TritonPythonModel:
    def initialize(self, args):
        p = model_parameters(args)
        self.names = p
        engine_config = json.loads((Path(p["target_engine_dir"]) / "config.json").read_text())
        self.block = EngineBlock.from_engine_config(engine_config)
        head = JudgeHead.load(self.block.judge_file)
        check_route_judge("triton-context", head)
        self.default_threshold = head.threshold
        self.draft_engine_config = json.loads((Path(p["draft_engine_dir"]) / "config.json").read_text())
        self.tokenizer = AutoTokenizer.from_pretrained(p["tokenizer_dir"])
        eos = self.tokenizer.eos_token_id
        pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        self.stop_ids = [eos]
        self.drafter = TritonDrafter(p["draft_model_name"], int(engine_config["pretrained_config"]["vocab_size"]), eos, pad)
        self.verifier = TritonVerifier(p["target_model_name"], needs_greedy_child=head.lookahead > 0)

    def _one(self, request):
        prompt = output_array(call(self.names["preprocessing_model_name"],
                                   {"text_input": input_array(request, "text_input").reshape(1)}, ["input_ids"]),
                              "input_ids").reshape(-1).tolist()
        max_tokens = int(input_array(request, "max_tokens").reshape(-1)[0])
        threshold = float(input_array(request, "threshold", np.array([self.default_threshold])).reshape(-1)[0])
        depth = int(input_array(request, "num_draft_tokens", np.array([self.block.max_path_len - 1])).reshape(-1)[0])
        width = int(input_array(request, "draft_width", np.array([1])).reshape(-1)[0])
        check_draft_width(width, self.draft_engine_config)
        tree = chain_tree(depth, width)
        if (tree.num_nodes > self.block.max_draft_nodes or len(tree.paths) > self.block.max_paths
                or depth + 1 > self.block.max_path_len):
            raise ValueError(f"num_draft_tokens {depth} / draft_width {width} exceed the engine's limits: "
                             f"depth <= {self.block.max_path_len - 1}, nodes <= {self.block.max_draft_nodes}")
        (result,) = engine_generate(self.drafter, self.verifier, [prompt], tree=tree, thresholds=[threshold],
                                    max_new_tokens=max_tokens, stop_ids=self.stop_ids)
        text = output_array(call(self.names["postprocessing_model_name"],
                                 {"tokens": np.asarray(result.tokens, np.int32)}, ["text_output"]), "text_output")
        return [
            pb_utils.Tensor("text_output", text.reshape(1)),
            pb_utils.Tensor("output_ids", np.asarray(result.tokens, np.int32)),
            pb_utils.Tensor("accepted_lengths", np.asarray([c.accepted for c in result.cycles], np.int32)),
            pb_utils.Tensor("judged_counts", np.asarray([c.judged for c in result.cycles], np.int32)),
            pb_utils.Tensor("cycles", np.asarray([len(result.cycles)], np.int32)),
        ]

    def execute(self, requests):
        responses = []
        for request in requests:
            try:
                responses.append(pb_utils.InferenceResponse(output_tensors=self._one(request)))
            except Exception as e:
                responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))))
        return responses
