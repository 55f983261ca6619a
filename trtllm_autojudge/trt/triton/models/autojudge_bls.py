"""Triton model ``autojudge_bls``: AutoJudge speculative decoding for one text request.

Each cycle it asks ``tensorrt_llm_draft`` for a chain tree's draft and ``autojudge_target`` for the
judge-gated acceptance, through :func:`trtllm_autojudge.trt.runner.loop.engine_generate` (the same loop
the engine runner uses). Request inputs: ``text_input``, ``max_tokens``, optional ``threshold``
(default: the judge file's), ``num_draft_tokens`` (D, default: the engine's longest path),
``draft_width`` (W, default 1; W > 1 needs a draft built with ``--gather_generation_logits``) and
``stream``; each is checked before any model runs (:mod:`trtllm_autojudge.trt.triton.request_settings`).
Outputs: ``text_output``, ``output_ids`` and the per-request metrics ``accepted_lengths`` /
``judged_counts`` (one entry per cycle) and ``cycles``. It serves target-only judges (the stock draft
model returns no hidden states); for a lookahead judge each cycle carries ``greedy_child``.

Decoupled (``model_transaction_policy { decoupled: true }``, the CPU route) it answers through the
response sender: one response, or with ``stream`` one per cycle (``text_output`` the new text,
``output_ids`` the cycle's tokens, ``accepted_lengths`` / ``judged_counts`` its metrics, ``cycles``
the count so far), then the final flag. A request the client cancelled (a closed stream) stops after
its current cycle. Its requests to the draft and target models carry an id of their own; with
``keyed_caches`` (the CPU route's stand-ins keep a KV cache per request id) a request that ends, fails
or is cancelled sends each of them a ``stop`` request that frees its cache.
"""
import itertools
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
from trtllm_autojudge.trt.triton.request_settings import check_context, read_settings
from trtllm_autojudge.trt.triton.tensors import (ACCEPTANCE_TENSORS, STOP_TENSOR, cycle_to_tensors, stop_cycle_tensors,
                                                 tensors_to_acceptance)
from trtllm_autojudge.trt.triton.models._common import call, input_array, model_parameters, output_array


class RequestCancelled(Exception):
    pass


class TritonDrafter:
    def __init__(self, model_name, vocab_size, end_id, pad_id, request_id=""):
        self.model_name, self.vocab_size, self.end_id, self.pad_id = model_name, vocab_size, end_id, pad_id
        self.request_id = request_id

    def inputs(self, prefix, D, W):
        return {
            "input_ids": np.asarray([prefix], np.int32),  # [1, L]
            "input_lengths": np.asarray([[len(prefix)]], np.int32),
            "request_output_len": np.asarray([[D]], np.int32),
            "end_id": np.asarray([[self.end_id]], np.int32),
            "pad_id": np.asarray([[self.pad_id]], np.int32),
            "runtime_top_k": np.asarray([[1]], np.int32),
            "return_generation_logits": np.asarray([[W > 1]], np.bool_),
        }

    def propose(self, prefixes, tree, need_hidden):
        if need_hidden:
            raise ValueError(f"the stock draft model gives no hidden states: serve {route_setups('triton-context')}")
        D, W = tree.max_depth, chain_width(tree)
        (prefix,) = prefixes
        response = call(self.model_name, self.inputs(prefix, D, W),
                        ["output_ids", "sequence_length"] + (["generation_logits"] if W > 1 else []), self.request_id)
        logits = output_array(response, "generation_logits")[:, 0] if W > 1 else None  # [1, D, V]
        chain, topk, valid = draft_from_outputs(prefixes, output_array(response, "output_ids")[:, 0],
                                                output_array(response, "sequence_length")[:, 0], logits, D, W,
                                                self.vocab_size, self.end_id)
        node_tokens, draft_lens = tree_from_chain(chain, topk, valid, tree)
        return DraftProposal(node_tokens, draft_lens, None, forwards=D)

    def stop(self):
        call(self.model_name, {**self.inputs([self.end_id], 1, 1), STOP_TENSOR[0]: np.asarray([[True]])},
             ["sequence_length"], self.request_id)


class TritonVerifier:
    needs_draft_hidden = False

    def __init__(self, model_name, needs_greedy_child, request_id=""):
        self.model_name = model_name
        self.needs_greedy_child = needs_greedy_child  # a lookahead judge: the cycles carry greedy_child
        self.request_id = request_id

    def verify(self, cycle):
        response = call(self.model_name, cycle_to_tensors(cycle), list(ACCEPTANCE_TENSORS), self.request_id)
        return tensors_to_acceptance({name: output_array(response, name) for name in ACCEPTANCE_TENSORS})

    def stop(self):
        call(self.model_name, stop_cycle_tensors(self.needs_greedy_child), ["accepted_lens"], self.request_id)


def text_tensor(text):
    return pb_utils.Tensor("text_output", np.array([text.encode("utf-8")], dtype=np.object_))


class TextStream:
    """The text of a growing token list, sent in pieces that never end inside a character: a piece
    whose decoding ends with U+FFFD (an unfinished UTF-8 sequence) waits for the next tokens."""

    def __init__(self, decode):
        self.decode, self.tokens, self.sent = decode, [], ""

    def add(self, tokens, final=False):
        self.tokens += tokens
        text = self.decode(self.tokens)
        if not final:
            text = text.rstrip("\ufffd")
        if not text.startswith(self.sent) or len(text) <= len(self.sent):
            return ""
        piece, self.sent = text[len(self.sent):], text
        return piece


class TritonPythonModel:
    def initialize(self, args):
        p = model_parameters(args)
        self.names = p
        self.instance = args["model_instance_name"]
        self.counter = itertools.count()
        self.decoupled = pb_utils.using_decoupled_model_transaction_policy(json.loads(args["model_config"]))
        self.keyed_caches = p.get("keyed_caches", "false") == "true"
        engine_config = json.loads((Path(p["target_engine_dir"]) / "config.json").read_text())
        self.block = EngineBlock.from_engine_config(engine_config)
        self.max_seq_len = engine_config.get("build_config", {}).get("max_seq_len")
        head = JudgeHead.load(self.block.judge_file)
        check_route_judge("triton-context", head)
        self.default_threshold, self.certificate = head.threshold, head.meta.get("certificate")
        self.lookahead = head.lookahead > 0
        self.draft_engine_config = json.loads((Path(p["draft_engine_dir"]) / "config.json").read_text())
        self.tokenizer = AutoTokenizer.from_pretrained(p["tokenizer_dir"])
        eos = self.tokenizer.eos_token_id
        self.pad = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else eos
        self.stop_ids = [eos]
        self.vocab_size = int(engine_config["pretrained_config"]["vocab_size"])

    def decode(self, tokens):
        response = call(self.names["postprocessing_model_name"], {"tokens": np.asarray(tokens, np.int32)},
                        ["text_output"])
        return output_array(response, "text_output").reshape(-1)[0].decode("utf-8")

    def generate(self, request, send):
        """Serve one request; ``send(tensors)`` sends a streamed response. Returns the final outputs
        (None for a streamed request)."""
        text = input_array(request, "text_input")
        if text is None:
            raise ValueError("the request lacks the input 'text_input' (the prompt)")
        settings = read_settings(lambda name: input_array(request, name), self.block, self.default_threshold,
                                 self.decoupled, self.certificate)
        check_draft_width(settings.width, self.draft_engine_config)
        text = text.reshape(-1)[0]
        if not (text.decode("utf-8") if isinstance(text, bytes) else str(text)).strip():
            raise ValueError("text_input is empty: give a prompt")
        prompt = output_array(call(self.names["preprocessing_model_name"], {"text_input": np.array([text], np.object_)},
                                   ["input_ids"]), "input_ids").reshape(-1).tolist()
        check_context(len(prompt), settings, self.max_seq_len)
        key = f"{self.instance}/{next(self.counter)}"
        eos = self.stop_ids[0]
        drafter = TritonDrafter(self.names["draft_model_name"], self.vocab_size, eos, self.pad, key)
        verifier = TritonVerifier(self.names["target_model_name"], self.lookahead, key)
        stream = TextStream(self.decode)
        cycles = []

        def on_cycle(_, tokens, metrics):
            cycles.append(metrics)
            if request.is_cancelled():
                raise RequestCancelled(f"request {request.request_id()!r} was cancelled by its client")
            if settings.stream:
                send([text_tensor(stream.add(tokens)), pb_utils.Tensor("output_ids", np.asarray(tokens, np.int32)),
                      pb_utils.Tensor("accepted_lengths", np.asarray([metrics.accepted], np.int32)),
                      pb_utils.Tensor("judged_counts", np.asarray([metrics.judged], np.int32)),
                      pb_utils.Tensor("cycles", np.asarray([len(cycles)], np.int32))])

        try:
            (result,) = engine_generate(drafter, verifier, [prompt], tree=chain_tree(settings.depth, settings.width),
                                        thresholds=[settings.threshold], max_new_tokens=settings.max_tokens,
                                        stop_ids=self.stop_ids, on_cycle=on_cycle)
        finally:
            if self.keyed_caches:
                self.stop_request(drafter, verifier)
        if settings.stream:
            rest = stream.add([], final=True)
            if rest:
                send([text_tensor(rest), pb_utils.Tensor("output_ids", np.zeros(0, np.int32)),
                      pb_utils.Tensor("accepted_lengths", np.zeros(0, np.int32)),
                      pb_utils.Tensor("judged_counts", np.zeros(0, np.int32)),
                      pb_utils.Tensor("cycles", np.asarray([len(result.cycles)], np.int32))])
            return None
        return [
            text_tensor(self.decode(result.tokens)),
            pb_utils.Tensor("output_ids", np.asarray(result.tokens, np.int32)),
            pb_utils.Tensor("accepted_lengths", np.asarray([c.accepted for c in result.cycles], np.int32)),
            pb_utils.Tensor("judged_counts", np.asarray([c.judged for c in result.cycles], np.int32)),
            pb_utils.Tensor("cycles", np.asarray([len(result.cycles)], np.int32)),
        ]

    @staticmethod
    def stop_request(drafter, verifier):
        """Free the request's caches in the stand-ins; a failure is logged (the request's own outcome stands)."""
        for model in (drafter, verifier):
            try:
                model.stop()
            except Exception as e:
                pb_utils.Logger.log_error(f"autojudge_bls: freeing request {model.request_id}'s cache in "
                                          f"{model.model_name} failed: {e}")

    def execute(self, requests):
        if not self.decoupled:
            responses = []
            for request in requests:
                try:
                    responses.append(pb_utils.InferenceResponse(output_tensors=self.generate(request, None)))
                except Exception as e:
                    responses.append(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))))
            return responses
        for request in requests:
            sender = request.get_response_sender()
            send = lambda tensors: sender.send(pb_utils.InferenceResponse(output_tensors=tensors))  # noqa: E731
            try:
                outputs = self.generate(request, send)
                if outputs is not None:
                    send(outputs)
                sender.send(flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
            except Exception as e:
                try:
                    sender.send(pb_utils.InferenceResponse(error=pb_utils.TritonError(str(e))),
                                flags=pb_utils.TRITONSERVER_RESPONSE_COMPLETE_FINAL)
                except Exception as gone:  # a cancelled request's client may be gone
                    pb_utils.Logger.log_info(f"autojudge_bls: {e}; its error response was not sent: {gone}")
        return None
