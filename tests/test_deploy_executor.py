"""The runner's executors, driven through fake ``tensorrt_llm.bindings.executor`` bindings that keep
the executor's own refusal: a request with ``return_generation_logits`` fails unless
``ExecutorConfig.gather_generation_logits`` is set or the engine was built with
``--gather_generation_logits`` (``executorImpl.cpp``; docs/deploy.md, "Checked against the sources")."""
import json
import sys
import types
from pathlib import Path

import pytest
import torch

from trtllm_autojudge.trt.runner.chain_drafter import ChainTreeDrafter
from trtllm_autojudge.trt.runner.engines import ExecutorDraftEngine, leader_executor
from trtllm_autojudge.trt.runner.packing import chain_tree

V = 10  # the fake draft continues every sequence with last + 1, and ranks last + 2 second
REFUSAL = "To return generation logits, gather_generation_logits must be enabled in ExecutorConfig"  # executorImpl.cpp


class Record:
    """A binding class: keeps what it is given."""

    def __init__(self, *args, **kwargs):
        self.args = args
        self.__dict__.update(kwargs)


class ExecutorConfig(Record):
    gather_generation_logits = False  # the binding's default


class Executor:
    """Greedy generation of the fake draft; refuses generation logits as the real executor does."""

    def __init__(self, engine_dir: Path, model_type, config: ExecutorConfig):
        built = json.loads((engine_dir / "config.json").read_text())["build_config"]
        self.config, self.responses = config, []
        # TrtGptModelInflightBatching::getGatherGenerationLogits: the engine's flag or the executor's
        self.gathers = bool(built.get("gather_generation_logits")) or config.gather_generation_logits

    def enqueue_requests(self, requests):
        ids = list(range(len(self.responses), len(self.responses) + len(requests)))
        for request_id, request in zip(ids, requests):
            if request.output_config.return_generation_logits and not self.gathers:
                self.responses.append(types.SimpleNamespace(request_id=request_id, has_error=lambda: True,
                                                            error_msg=REFUSAL))
                continue
            tokens = list(request.input_token_ids)
            for _ in range(request.max_tokens):
                tokens.append((tokens[-1] + 1) % V)
            logits = torch.zeros(1, request.max_tokens, V)
            for k, t in enumerate(tokens[len(request.input_token_ids):]):
                logits[0, k, t], logits[0, k, (t + 1) % V] = 2.0, 1.0
            result = types.SimpleNamespace(is_final=True, output_token_ids=[tokens], generation_logits=logits,
                                           additional_outputs=[])
            self.responses.append(types.SimpleNamespace(request_id=request_id, has_error=lambda: False, result=result))
        return ids

    def await_responses(self):
        out, self.responses = self.responses, []
        return out

    def shutdown(self):
        pass


@pytest.fixture
def bindings(monkeypatch):
    """``tensorrt_llm.bindings.executor`` with the names the runner uses."""
    executor = types.SimpleNamespace(
        ExecutorConfig=ExecutorConfig, Executor=Executor, KvCacheConfig=Record, ParallelConfig=Record,
        CommunicationType=types.SimpleNamespace(MPI="MPI"), CommunicationMode=types.SimpleNamespace(LEADER="LEADER"),
        ModelType=types.SimpleNamespace(DECODER_ONLY="DECODER_ONLY"), OutputConfig=Record, Request=Record,
        SamplingConfig=Record, AdditionalModelOutput=Record)
    root = types.ModuleType("tensorrt_llm")
    root.bindings = types.ModuleType("tensorrt_llm.bindings")
    root.bindings.executor = executor
    monkeypatch.setitem(sys.modules, "tensorrt_llm", root)
    monkeypatch.setitem(sys.modules, "tensorrt_llm.bindings", root.bindings)
    monkeypatch.setitem(sys.modules, "tensorrt_llm.bindings.executor", executor)
    return executor


def draft_engine_dir(tmp_path, gather_generation_logits: bool) -> Path:
    (tmp_path / "config.json").write_text(json.dumps({
        "pretrained_config": {"architecture": "LlamaForCausalLM", "vocab_size": V},
        "build_config": {"max_batch_size": 4, "gather_generation_logits": gather_generation_logits}}))
    return tmp_path


def test_the_draft_executor_returns_generation_logits_from_a_stock_build(bindings, tmp_path):
    """A chain tree of width 2 takes its siblings from the draft's generation logits; the draft
    engine is stock (built without --gather_generation_logits)."""
    engine = ExecutorDraftEngine(draft_engine_dir(tmp_path, False), end_id=V - 1, pad_id=0)
    assert engine.executor.config.gather_generation_logits
    (out,) = engine.generate([[3, 4]], 3, logits=True, hidden=False)
    assert out.tokens == [5, 6, 7] and out.logits.shape == (3, V) and out.logits[0].argmax() == 5
    proposal = ChainTreeDrafter(engine).propose([[3, 4]], chain_tree(2, 2), need_hidden=False)
    # nodes: depth 1 (chain 5, sibling 6), depth 2 under the chain node (chain 6, sibling 7)
    assert proposal.node_tokens.tolist() == [[5, 6, 6, 7]] and proposal.draft_lens.tolist() == [4]


def test_an_executor_without_the_flag_refuses_generation_logits(bindings, tmp_path):
    """What the draft executor avoids: the fake keeps the real executor's refusal."""
    engine_dir = draft_engine_dir(tmp_path, False)
    config = json.loads((engine_dir / "config.json").read_text())
    executor = leader_executor(bindings, engine_dir, config, None, [])
    assert not executor.config.gather_generation_logits  # the stock target asks for no logits
    request = Record(input_token_ids=[1], max_tokens=2, output_config=Record(return_generation_logits=True))
    executor.enqueue_requests([request])
    (response,) = executor.await_responses()
    assert response.has_error() and "gather_generation_logits must be enabled" in response.error_msg
