"""PyTorch-backend integration, the part without TensorRT-LLM: the batched judged acceptance that
replaces TorchSampler's greedy/tree walk, its row layout, a TorchSampler-style drive of it, and
enable_autojudge inside a fake TensorRT-LLM with the 1.2 signatures."""
import ast
import re
import sys
import types
from pathlib import Path

import numpy as np
import pytest
import torch

from tiny_models import EOS, VOCAB, tiny_pair
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import propose, speculative_generate, verify
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead
from trtllm_autojudge.trt.pytorch.backend import (JudgeScorer, accept_requests, batch_paths,
                                                  generation_row_offsets, node_row_index, step_tokens)



def op_available() -> bool:
    try:
        from trtllm_autojudge.ops.torch_ops import accept  # noqa: F401
        from trtllm_autojudge.ops.host_library import host_core

        host_core()
        return True
    except Exception:  # the host core is not built (no compiler): the reference path still runs
        return False


MODES = [False, pytest.param(True, marks=pytest.mark.skipif(not op_available(),
                                                            reason="torch.ops.autojudge host core not built"))]


def dt_head(H=8, seed=1, threshold=0.4):
    rng = np.random.default_rng(seed)
    return JudgeHead(rng.normal(size=H), rng.normal(size=H), rng.uniform(1, 2, size=H), 0.1, "DT", 4, H,
                     threshold=threshold)


def test_row_layout():
    assert generation_row_offsets(3, [4, 0, 2]) == [3, 8, 9]
    index, N = node_row_index([3, 8, 9], [4, 0, 2])
    assert N == 4 and index.reshape(3, 5).tolist() == [[3, 4, 5, 6, 7], [8, 8, 8, 8, 8], [9, 10, 11, 9, 9]]
    paths = batch_paths([2, 3], [None, np.array([[0, 1, 3], [0, 2, -1]])])
    assert paths.tolist() == [[[0, 1, 2], [-1, -1, -1]], [[0, 1, 3], [0, 2, -1]]]


@pytest.mark.parametrize("use_op", MODES)
def test_batch_acceptance_of_a_step(use_op):
    """Two requests of one step: a chain whose middle mismatch the judge lets through, and a tree."""
    head = dt_head()
    scorer = JudgeScorer(head, threshold=0.5)
    V, H = 12, 8
    logits = torch.full((1 + 4 + 5, V), -5.0)  # one context row, then 1+3 and 1+4 generation rows
    hidden = torch.zeros(10, H)
    for row, tok in {1: 5, 2: 9, 3: 7, 4: 8, 5: 3, 6: 4, 7: 0, 8: 1, 9: 2}.items():
        logits[row, tok] = 5.0  # target argmax per row
    w = torch.from_numpy(head.folded()[0]).double()
    direction = (w / w.dot(w)).float()
    hidden[3] = direction * (-50.0 - head.folded()[1])  # node 2 of request 0: judge logit -50 (unimportant)
    # every other row has hidden 0: judge logit c = 0.1... > logit(0.5) = 0, important (rejected)
    assert head.folded()[1] > 0
    offsets = generation_row_offsets(1, [3, 4])
    index, N = node_row_index(offsets, [3, 4])
    draft = np.array([[5, 6, 7, 0], [3, 11, 4, 1]])  # request 0: 6 != 9 at node 2; request 1: tree below
    tree = np.array([[0, 1, 3, -1], [0, 2, 4, -1]])  # node1=3 (after root), node2=11, node3=4 (after 1), node4=1 (after 2)
    paths = batch_paths([3, 4], [None, tree])
    acc = accept_requests(scorer, logits, hidden, index, draft, np.array([3, 4]), paths, np.array([0.5, 0.5]), use_op)
    s0, s1 = step_tokens(acc, 0, paths), step_tokens(acc, 1, paths)
    assert (s0.tokens, s0.rows, s0.accepted, s0.judged) == ([5, 6, 7, 8], [0, 1, 2, 3], 3, 1)
    assert (s1.tokens, s1.rows, s1.accepted, s1.judged) == ([3, 4, 1], [0, 1, 3], 2, 0)
    lossless = accept_requests(scorer, logits, hidden, index, draft, np.array([3, 4]), paths, np.zeros(2), use_op)
    assert step_tokens(lossless, 0, paths).tokens == [5, 9]  # the exact-match walk stops at node 2


def test_scorer_refuses_other_setups():
    with pytest.raises(ValueError, match="DT judges"):
        JudgeScorer(JudgeHead(np.ones(12), np.zeros(12), np.ones(12), 0.0, "DD-DT", 4, 8))
    with pytest.raises(ValueError, match="threshold"):
        JudgeScorer(dt_head(), threshold=2.0)


@pytest.mark.parametrize("use_op", MODES)
@pytest.mark.parametrize("tree", [DraftTree.chain(4), DraftTree.static([2, 2])], ids=["chain", "tree"])
def test_sampler_drive_reproduces_the_reference_loop(tree, use_op):
    """Drive the acceptance the way TorchSampler does: per step, the logits rows and the LM head's
    input rows of each request; the judged step then decides the tokens to append."""
    target, draft = tiny_pair(seed=0)
    rng = np.random.default_rng(2)
    head = JudgeHead(rng.normal(size=64), np.zeros(64), np.ones(64), 0.0, "DT", 64, 64)
    scorer = JudgeScorer(head, threshold=0.5)
    prompt = rng.integers(3, VOCAB, size=6).tolist()
    ref = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head, 0.5), max_new_tokens=20)
    tokens, judged, N = list(prompt), 0, tree.num_nodes
    paths = batch_paths([N], [tree.paths])
    while len(tokens) - len(prompt) < 20 and tokens[-1] != EOS:
        node_tokens = propose(draft.session(), tokens, tree).node_tokens
        logits, hidden, _ = verify(target.session(), tokens, tree, node_tokens)  # [N+1, V], [N+1, H]
        index, _ = node_row_index([0], [N])
        acc = accept_requests(scorer, logits, hidden, index, node_tokens[None], np.array([N]), paths, np.array([0.5]),
                              use_op)
        step = step_tokens(acc, 0, paths)
        judged += step.judged
        for t in step.tokens[: 20 - (len(tokens) - len(prompt))]:
            tokens.append(t)
            if t == EOS:
                break
    assert tokens[len(prompt):] == ref.tokens
    assert judged == sum(c.judged for c in ref.cycles) and judged > 0


# ---------------------------------------------------------------------------------------------
# enable_autojudge inside a fake TensorRT-LLM whose sampler and drafter have the 1.2 signatures
# (docs/deploy.md, "Checked against the sources"): the module constant BEAM, the classmethod
# _handle_stop_criteria(request, new_token, *, max_seq_len), process_draft_tokens(request,
# new_tokens_tensor, new_tokens_list, finish_reasons, resource_manager=None), and drafts padded with
# token 0 up to max_draft_tokens by the drafter before the target runs them.

GREEDY = "greedy"


def fake_tensorrt_llm(monkeypatch, *, beam_search_era: bool = False, padder=("drafter", "Drafter",
                                                                             "pad_draft_tokens_for_cuda_graph")):
    """Install the fake as ``tensorrt_llm``; returns (sampler module, drafter class). The 1.2 line,
    or with ``beam_search_era`` the later spelling (DEFAULT_BEAM_IDX, ``beam_idx=``)."""
    def module(name, **attrs):
        mod = types.ModuleType(name)
        mod.__dict__.update(attrs)
        monkeypatch.setitem(sys.modules, name, mod)
        return mod

    def get_draft_token_length(request):
        return len(request.py_draft_tokens) if request.py_draft_tokens is not None else 0

    class TorchSampler:
        max_seq_len = 64

        def sample_async(self, scheduled_requests, model_outputs, num_context_logits_prefix_sum, resource_manager=None):
            return "state"

        def process_draft_tokens(self, request, new_tokens_tensor, new_tokens_list, finish_reasons,
                                 resource_manager=None):
            raise AssertionError("the judge handles every greedy request with drafts")

        def get_spec_tree_manager(self, resource_manager):
            return None

    if beam_search_era:
        @classmethod
        def _handle_stop_criteria(cls, request, new_token, *, max_seq_len, beam_idx):
            assert beam_idx == 0
            return new_token == request.py_end_id or len(request.tokens) >= max_seq_len
        beam = {"DEFAULT_BEAM_IDX": 0}
    else:
        @classmethod
        def _handle_stop_criteria(cls, request, new_token, *, max_seq_len):
            return new_token == request.py_end_id or len(request.tokens) >= max_seq_len
        beam = {"BEAM": 0}
    TorchSampler._handle_stop_criteria = _handle_stop_criteria

    class Drafter:
        max_draft_tokens = 3

        def pad(self, scheduled_requests):
            for req in scheduled_requests.generation_requests:
                req.py_draft_tokens.extend(0 for _ in range(self.max_draft_tokens - get_draft_token_length(req)))

    module_name, cls_name, method = padder
    setattr(Drafter, method, Drafter.pad)
    Drafter.__name__ = cls_name

    class LMHead(torch.nn.Linear):
        pass

    sampler = module("tensorrt_llm._torch.pyexecutor.sampler", TorchSampler=TorchSampler, GREEDY=GREEDY,
                     get_draft_token_length=get_draft_token_length,
                     _request_strategy=lambda request, *, vocab_size: GREEDY, **beam)
    module("tensorrt_llm")
    module("tensorrt_llm._torch")
    module("tensorrt_llm._torch.pyexecutor", sampler=sampler)
    module("tensorrt_llm._torch.modules")
    module("tensorrt_llm._torch.modules.embedding", LMHead=LMHead)
    module("tensorrt_llm._torch.speculative")
    module(f"tensorrt_llm._torch.speculative.{module_name}", **{cls_name: Drafter})
    return sampler, Drafter, LMHead


class FakeRequest:
    def __init__(self, tokens, drafts, end_id=EOS):
        self.tokens, self.py_draft_tokens, self.py_end_id = list(tokens), list(drafts), end_id
        self.py_seq_slot, self.py_request_id = 0, 7

    def add_new_token(self, token, beam):
        assert beam == 0
        self.tokens.append(int(token))


@pytest.fixture
def autojudge():
    from trtllm_autojudge.trt.pytorch.sampler import disable_autojudge, enable_autojudge

    yield enable_autojudge
    disable_autojudge()


def relaxed_step(head, argmax_rows):
    """Logits rows with the given argmax and hidden rows the judge calls unimportant (logit -50)."""
    V, H = 12, head.target_hidden
    logits = torch.full((len(argmax_rows), V), -5.0)
    for row, tok in enumerate(argmax_rows):
        logits[row, tok] = 5.0
    w, c = head.folded()
    w = torch.from_numpy(w).double()
    hidden = ((w / w.dot(w)).float() * (-50.0 - c)).expand(len(argmax_rows), H).clone()
    return logits, hidden


@pytest.mark.parametrize("beam_search_era", [False, True], ids=["1.2", "beam_idx"])
@pytest.mark.parametrize("padder", [("drafter", "Drafter", "pad_draft_tokens_for_cuda_graph"),
                                    ("model_drafter", "ModelDrafter", "_pad_to_max_draft_tokens")],
                         ids=["Drafter", "ModelDrafter"])
def test_a_padded_draft_token_is_never_judged(monkeypatch, autojudge, beam_search_era, padder):
    """The drafter drafted one token and padded two zeros; the target predicts other tokens there,
    and the judge would let any mismatch through. Only the drafted token may be accepted."""
    sampler_mod, Drafter, LMHead = fake_tensorrt_llm(monkeypatch, beam_search_era=beam_search_era, padder=padder)
    head = dt_head()
    stats = autojudge(head, threshold=0.9, use_op=False)
    request = FakeRequest([3, 4], [5])
    batch = types.SimpleNamespace(context_requests=[], generation_requests=[request])
    getattr(Drafter(), padder[2])(batch)
    assert request.py_draft_tokens == [5, 0, 0]  # what the target engine runs
    logits, hidden = relaxed_step(head, [5, 9, 7, 8])  # rows: root, then after each draft token
    LMHead(head.target_hidden, 12)(hidden)  # the forward's LM head: the hook keeps its input rows
    sampler = sampler_mod.TorchSampler()
    assert sampler.sample_async(batch, {"logits": logits}, [0]) == "state"
    new_tokens = torch.tensor([5, 9, 7, 8]).view(4, 1, 1)
    accepted = sampler.process_draft_tokens(request, new_tokens_tensor=new_tokens, new_tokens_list=new_tokens.tolist(),
                                            finish_reasons=[[0, 0, 0, 0]], resource_manager=None)
    assert request.tokens == [3, 4, 5, 9] and accepted == 1  # the draft, then the target's token after it
    assert new_tokens.view(-1).tolist()[:2] == [5, 9]
    assert stats.judged[7] == 0 and stats.accepted[7] == 1


def test_judged_tokens_stop_at_the_end_id_through_the_12_stop_criteria(monkeypatch, autojudge):
    """A mismatch the judge accepts is appended and checked with _handle_stop_criteria(request,
    token, max_seq_len=...): the judged end_id ends the request."""
    sampler_mod, Drafter, LMHead = fake_tensorrt_llm(monkeypatch)
    head = dt_head()
    stats = autojudge(head, threshold=0.9, use_op=False)
    request = FakeRequest([3], [6, EOS, 9])
    batch = types.SimpleNamespace(context_requests=[], generation_requests=[request])
    Drafter().pad_draft_tokens_for_cuda_graph(batch)
    logits, hidden = relaxed_step(head, [5, 4, 3, 2])
    LMHead(head.target_hidden, 12)(hidden)
    sampler = sampler_mod.TorchSampler()
    sampler.sample_async(batch, {"logits": logits}, [0])
    new_tokens = torch.tensor([5, 4, 3, 2]).view(4, 1, 1)
    sampler.process_draft_tokens(request, new_tokens, new_tokens.tolist(), [[0] * 4])  # positional, as well
    assert request.tokens == [3, 6, EOS] and stats.judged[7] == 2


def test_the_example_and_the_docs_name_the_draft_with_speculative_model_dir():
    """DraftTargetDecodingConfig(speculative_model=...) exists only in later releases;
    speculative_model_dir is accepted by every 1.x release."""
    repo = Path(__file__).resolve().parents[1]
    tree = ast.parse((repo / "examples" / "pytorch_backend_llm_api.py").read_text())
    (call,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") ==
               "DraftTargetDecodingConfig"]
    assert {k.arg for k in call.keywords} == {"max_draft_len", "speculative_model_dir"}
    from trtllm_autojudge.trt.pytorch import sampler

    for text in (sampler.__doc__, (repo / "docs" / "deploy.md").read_text()):
        calls = re.findall(r"DraftTargetDecodingConfig\(([^)]*)\)", text)
        assert calls and all("speculative_model_dir=" in c and "speculative_model=" not in c for c in calls), calls
