"""PyTorch-backend integration, the part without TensorRT-LLM: the batched judged acceptance that
replaces TorchSampler's greedy/tree walk, its row layout, a TorchSampler-style drive of it, and
enable_autojudge inside a fake TensorRT-LLM with the 1.2 signatures."""
import ast
import re
import sys
import types
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
import torch

from tiny_models import EOS, VOCAB, tiny_pair
from trtllm_autojudge.decoding.modes import JudgeRule, VerifyContext
from trtllm_autojudge.decoding.rules import judge_relaxed
from trtllm_autojudge.decoding.speculative import propose, speculative_generate, verify
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead
from trtllm_autojudge.spec.acceptance import accept_tree
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
    # node 2 opens 2 tokens (itself, then node 3 exact): a minimum run of 2 keeps it judged, one of 3 does not
    for min_run, tokens in ((2, [5, 6, 7, 8]), (3, [5, 9])):
        held = JudgeScorer(replace(head, meta={"min_run": min_run}), threshold=0.5)
        acc = accept_requests(held, logits, hidden, index, draft, np.array([3, 4]), paths, np.array([0.5, 0.5]), use_op)
        assert step_tokens(acc, 0, paths).tokens == tokens, min_run


def test_scorer_refuses_other_setups():
    with pytest.raises(ValueError, match="judge setup DD-DT reads DD, which the PyTorch backend cannot feed"):
        JudgeScorer(JudgeHead(np.ones(12), np.zeros(12), np.ones(12), 0.0, "DD-DT", 4, 8))
    veto = {"classes": ["digits"], "token_ids": [3, 4]}
    with pytest.raises(ValueError, match=r"has a token veto \(classes \['digits'\]\), which torch.ops.autojudge"):
        JudgeScorer(JudgeHead(np.ones(8), np.zeros(8), np.ones(8), 0.0, "DT", 4, 8, meta={"veto": veto}))
    with pytest.raises(ValueError, match=r"has a limit of 2 judged acceptances per response \(max_judged\), which"):
        JudgeScorer(JudgeHead(np.ones(8), np.zeros(8), np.ones(8), 0.0, "DT", 4, 8, meta={"max_judged": 2}))
    assert JudgeScorer(JudgeHead(np.ones(8), np.zeros(8), np.ones(8), 0.0, "DT", 4, 8, meta={"min_run": 3}))  # applied
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
            tree = self.get_spec_tree_manager(resource_manager)
            if tree is None:
                raise AssertionError("the judge handles every greedy request with drafts")
            return self._process_draft_tokens_tree(request, new_tokens_tensor=new_tokens_tensor,
                                                   new_tokens_list=new_tokens_list, finish_reasons=finish_reasons,
                                                   spec_tree_manager=tree)

        def _process_draft_tokens_tree(self, request, new_tokens_tensor, new_tokens_list, finish_reasons,
                                       spec_tree_manager):
            """The stock exact-match tree walk: per eagle_paths row, 1 + the matching prefix; the first
            longest row wins; the target's token after each of its nodes is appended; the accepted
            nodes' draft-token indices are kept for the KV cache manager."""
            slot = request.py_seq_slot
            paths = spec_tree_manager.get_eagle_paths(slot)  # [N+1, D+1]
            drafts = torch.tensor(request.py_draft_tokens)  # [N]
            target = new_tokens_tensor[:, slot, 0]  # [N+1]: the target's token after each node
            best_len, best = 0, -1
            for p, path in enumerate(paths):
                nodes = path[path >= 0]
                match = (drafts[nodes[1:].long() - 1] == target[nodes[:-1].long()]).int()
                length = int(torch.cumprod(match, 0).sum()) + 1
                if length > best_len:
                    best_len, best = length, p
            added = 0
            for node in paths[best][:best_len]:
                request.add_new_token(new_tokens_list[int(node)][slot][0], 0)
                added += 1
                if finish_reasons[slot][int(node)]:
                    break
            request.py_num_accepted_draft_tokens_indices = (paths[best][1:added] - 1).tolist()
            return added - 1

        def get_spec_tree_manager(self, resource_manager):
            return None if resource_manager is None else resource_manager.spec_tree_manager

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
    def __init__(self, tokens, drafts, end_id=EOS, slot=0, request_id=7):
        self.tokens, self.py_draft_tokens, self.py_end_id = list(tokens), list(drafts), end_id
        self.py_seq_slot, self.py_request_id = slot, request_id
        self.py_num_accepted_draft_tokens_indices = []  # as LlmRequest starts

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


# ---------------------------------------------------------------------------------------------
# Static trees (two-model EAGLE3, EagleDecodingConfig(eagle_choices=...)): the 1.2-line
# TorchSampler._process_draft_tokens_tree walks the SpecTreeManager's eagle_paths and sets
# py_num_accepted_draft_tokens_indices, which the KV cache manager uses to keep the accepted nodes.
# The fake sampler's _process_draft_tokens_tree above is that stock walk (docs/deploy.md names the
# versions read).


class FakeSpecTreeManager:
    """TensorRT-LLM's SpecTreeManager for a static tree, as data: the choices deduplicated and sorted by
    (length, choice) as EagleDecodingConfig.check_eagle_choices does, node i + 1 = choice i, and
    eagle_paths [num_trees = 1, max_total_draft_tokens + 1, max_draft_len + 1] int32: row 0 the root
    alone, row n the nodes from the root to node n, -1 padded. get_eagle_paths ignores the slot."""

    use_dynamic_tree = False

    def __init__(self, eagle_choices):
        self.eagle_choices = [list(c) for c in sorted({tuple(c) for c in eagle_choices}, key=lambda c: (len(c), c))]
        self.max_total_draft_tokens = len(self.eagle_choices)
        self.max_draft_len = max(len(c) for c in self.eagle_choices)
        self.num_trees, self.cur_draft_layer_idx = 1, 0
        node = {tuple(c): i + 1 for i, c in enumerate(self.eagle_choices)}
        self.eagle_paths = torch.full((1, self.max_total_draft_tokens + 1, self.max_draft_len + 1), -1,
                                      dtype=torch.int32)
        self.eagle_paths[0, :, 0] = 0
        for i, c in enumerate(self.eagle_choices):
            self.eagle_paths[0, i + 1, 1 : len(c) + 1] = torch.tensor([node[tuple(c[: j + 1])] for j in range(len(c))])

    def get_eagle_paths(self, tree_idx=0):
        return self.eagle_paths[0]


def random_choices(rng, nodes: int, depth: int = 4) -> list[list[int]]:
    """A random static tree: each new node is the next-ranked child of a random node above depth."""
    children, choices = {(): 0}, []
    while len(choices) < nodes:
        parents = [c for c in children if len(c) < depth]
        parent = parents[rng.integers(len(parents))]
        child = parent + (children[parent],)
        children[parent] += 1
        children[child] = 0
        choices.append(list(child))
    return [choices[i] for i in rng.permutation(len(choices))]


CHOICES = [[[0], [1], [0, 0], [1, 0]],  # two paths of equal depth: the ties below
           [[0], [1], [2], [0, 0], [0, 1], [1, 0], [0, 0, 0], [0, 0, 1], [0, 1, 0]]]


def hidden_for(head, judge_logit):
    """[R, Ht] hidden rows on which the DT judge's logit is judge_logit[r]."""
    w, c = head.folded()
    w = torch.from_numpy(w).double()
    return ((w / w.dot(w))[None] * (torch.as_tensor(judge_logit, dtype=torch.float64)[:, None] - c)).float()


def judged_tree_step(monkeypatch, enable, head, threshold, manager, draft, logits, hidden, slots, drafted=None,
                     use_op=False, end_id=-1):
    """One step of B requests through enable_autojudge (``enable``) inside the fake TensorRT-LLM: the
    drafter's padding (drafted: the drafter's own counts), the forward's LM head, sample_async, then
    process_draft_tokens per request. Returns the requests, the accepted counts and new_tokens."""
    sampler_mod, Drafter, LMHead = fake_tensorrt_llm(monkeypatch)
    enable(head, threshold=threshold, use_op=use_op)
    B, N = draft.shape
    requests = [FakeRequest([3, 4], draft[b] if drafted is None else draft[b, : drafted[b]], end_id=end_id,
                            slot=slots[b], request_id=b) for b in range(B)]
    batch = types.SimpleNamespace(context_requests=[], generation_requests=requests)
    drafter = Drafter()
    drafter.max_draft_tokens = N
    drafter.pad_draft_tokens_for_cuda_graph(batch)
    LMHead(hidden.shape[1], logits.shape[1])(hidden)
    resources = types.SimpleNamespace(spec_tree_manager=manager)
    sampler = sampler_mod.TorchSampler()
    sampler.sample_async(batch, {"logits": logits}, [0], resources)
    new_tokens = stock_new_tokens(logits, slots, N)
    finish = [[0] * (N + 1) for _ in range(max(slots) + 1)]
    counts = [sampler.process_draft_tokens(r, new_tokens_tensor=new_tokens, new_tokens_list=new_tokens.tolist(),
                                           finish_reasons=finish, resource_manager=resources) for r in requests]
    return requests, counts, new_tokens


def stock_new_tokens(logits, slots, N):
    """[N+1, slots, 1]: the sampler's greedy token after each node of each request (rows packed per request)."""
    argmax = logits.argmax(-1).view(len(slots), N + 1)
    new_tokens = torch.zeros((N + 1, max(slots) + 1, 1), dtype=torch.int64)
    new_tokens[:, list(slots), 0] = argmax.T
    return new_tokens


def reference(head, threshold, manager, draft, logits, hidden, drafted=None):
    """accept_tree + judge_relaxed on the same rows: (appended tokens, accepted count, kept indices) per request."""
    B, N = draft.shape
    paths = np.broadcast_to(manager.get_eagle_paths().numpy(), (B, N + 1, manager.max_draft_len + 1))
    relaxed = judge_relaxed(head.logits(hidden.numpy()).reshape(B, N + 1), threshold)
    acc = accept_tree(draft, logits.argmax(-1).view(B, N + 1).numpy(), paths, relaxed,
                      None if drafted is None else np.asarray(drafted))
    return [(acc.tokens(b), int(acc.accepted_len[b]),
             [int(n) - 1 for n in paths[b, acc.best_path[b], 1 : acc.accepted_len[b] + 1]]) for b in range(B)]


def random_tree_step(rng, manager, B=3, V=16, H=8):
    """Target logits, drafts that copy the target's token at the parent 60 % of the time, hidden rows."""
    N = manager.max_total_draft_tokens
    logits = torch.from_numpy(rng.normal(size=(B * (N + 1), V)) * 3).float()
    argmax = logits.argmax(-1).view(B, N + 1).numpy()
    paths = manager.get_eagle_paths().numpy()
    parent = {int(row[k]): int(row[k - 1]) for row in paths for k in range(1, row.shape[0]) if row[k] >= 0}
    draft = rng.integers(0, V, size=(B, N))
    for b in range(B):
        for n in range(1, N + 1):
            if rng.random() < 0.6:
                draft[b, n - 1] = argmax[b, parent[n]]
    hidden = torch.from_numpy(rng.normal(size=(B * (N + 1), H))).float()
    return draft, logits, hidden


@pytest.mark.parametrize("use_op", MODES)
@pytest.mark.parametrize("seed", range(6))
def test_judged_tree_walk_equals_the_reference(monkeypatch, autojudge, seed, use_op):
    """Random static trees, logits, hidden rows, judges and thresholds: the tokens appended, the
    accepted counts and py_num_accepted_draft_tokens_indices equal accept_tree + judge_relaxed."""
    rng = np.random.default_rng(seed)
    choices = CHOICES[seed] if seed < len(CHOICES) else random_choices(rng, int(rng.integers(3, 12)))
    manager = FakeSpecTreeManager(choices)
    head = dt_head(seed=seed)
    threshold = float(rng.uniform(0.2, 0.8))
    draft, logits, hidden = random_tree_step(rng, manager)
    requests, counts, _ = judged_tree_step(monkeypatch, autojudge, head, threshold, manager, draft, logits, hidden,
                                           [2, 0, 1], use_op=use_op)
    got = [(r.tokens[2:], n, r.py_num_accepted_draft_tokens_indices) for r, n in zip(requests, counts)]
    assert got == reference(head, threshold, manager, draft, logits, hidden)


@pytest.mark.parametrize("seed", range(4))
def test_lossless_tree_walk_equals_the_stock_walk(monkeypatch, autojudge, seed):
    """At threshold 0 the judged walk appends what TorchSampler's exact-match tree walk appends,
    returns its count, keeps its indices, and leaves new_tokens as they were."""
    rng = np.random.default_rng(100 + seed)
    manager = FakeSpecTreeManager(random_choices(rng, int(rng.integers(3, 12))))
    draft, logits, hidden = random_tree_step(rng, manager)
    slots = [1, 2, 0]
    requests, counts, new_tokens = judged_tree_step(monkeypatch, autojudge, dt_head(seed=seed), 0.0, manager, draft,
                                                    logits, hidden, slots)
    assert any(counts)
    assert torch.equal(new_tokens, stock_new_tokens(logits, slots, manager.max_total_draft_tokens))
    from tensorrt_llm._torch.pyexecutor.sampler import TorchSampler

    stock = TorchSampler()
    resources = types.SimpleNamespace(spec_tree_manager=manager)
    for b, r in enumerate(requests):
        plain = FakeRequest([3, 4], draft[b], end_id=-1, slot=slots[b])  # no judged step: the stock walk
        n = stock.process_draft_tokens(plain, new_tokens, new_tokens.tolist(), [[0] * len(new_tokens)] * 3, resources)
        assert (r.tokens, counts[b], r.py_num_accepted_draft_tokens_indices) == \
            (plain.tokens, n, plain.py_num_accepted_draft_tokens_indices)


@pytest.mark.parametrize("judged, best_row", [([1, 4], 3), ([1], 4)], ids=["lower-row", "fewer-judged"])
def test_tree_ties(monkeypatch, autojudge, judged, best_row):
    """Tree [[0], [1], [0, 0], [1, 0]] (nodes 1, 2, then 3 under 1 and 4 under 2); every node is
    accepted, the judged ones as mismatches. Rows 3 and 4 both accept two nodes: with one judged
    node each the lower row wins, with node 1 judged only row 4 (no judged node) wins."""
    manager = FakeSpecTreeManager(CHOICES[0])
    argmax = [[5, 6, 7, 8, 9]]  # the target's token after nodes 0..4
    parent = {1: 0, 2: 0, 3: 1, 4: 2}
    draft = np.array([[argmax[0][parent[n]] + (10 if n in judged else 0) for n in range(1, 5)]])
    logits = torch.full((5, 20), -5.0)
    logits[range(5), argmax[0]] = 5.0
    judge_logit = [-50.0 if n in judged else 50.0 for n in range(5)]  # only the judged nodes are unimportant
    hidden = hidden_for(dt_head(), judge_logit)
    requests, counts, _ = judged_tree_step(monkeypatch, autojudge, dt_head(), 0.5, manager, draft, logits, hidden, [0])
    nodes = [int(n) for n in manager.get_eagle_paths()[best_row, 1:]]
    expected = ([int(draft[0, n - 1]) for n in nodes] + [argmax[0][nodes[-1]]], 2, [n - 1 for n in nodes])
    assert (requests[0].tokens[2:], counts[0], requests[0].py_num_accepted_draft_tokens_indices) == expected
    assert expected == reference(dt_head(), 0.5, manager, draft, logits, hidden)[0]


@pytest.mark.parametrize("use_op", MODES)
def test_a_padded_tree_draft_never_accepts_a_padded_node(monkeypatch, autojudge, use_op):
    """The drafter drafted the first nodes of a 9-node tree and padded the rest with 0; the judge
    lets every mismatch through. Only drafted nodes are accepted: accept_tree with draft_lens."""
    manager = FakeSpecTreeManager(CHOICES[1])
    head = dt_head()
    rng = np.random.default_rng(7)
    draft, logits, _ = random_tree_step(rng, manager, B=2)
    hidden = hidden_for(head, np.full(logits.shape[0], -50.0))
    drafted = [3, 5]
    draft[0, 3:], draft[1, 5:] = 0, 0
    requests, counts, _ = judged_tree_step(monkeypatch, autojudge, head, 0.5, manager, draft, logits, hidden, [0, 1],
                                           drafted=drafted, use_op=use_op)
    assert [r.py_draft_tokens for r in requests] == draft.tolist()  # what the target ran
    got = [(r.tokens[2:], n, r.py_num_accepted_draft_tokens_indices) for r, n in zip(requests, counts)]
    assert got == reference(head, 0.5, manager, draft, logits, hidden, drafted)
    assert all(i < k for (_, _, kept), k in zip(got, drafted) for i in kept)
    assert [n for _, n, _ in got] == [1, 2]  # 3 drafted: the first level (nodes 1-3); 5: also nodes 4, 5 under 1


def test_a_judged_end_id_in_a_tree_keeps_only_the_appended_nodes(monkeypatch, autojudge):
    """Tree [[0], [0, 0], [0, 0, 0]]; the judge accepts node 2's end_id: the request stops there, the
    count is 1 and only node 1's cache is kept (node 2's token is the sequence's last, its KV is
    the next step's), as the stock walk truncates on a finish."""
    manager = FakeSpecTreeManager([[0], [0, 0], [0, 0, 0]])
    draft = np.array([[5, EOS, 9]])
    logits = torch.full((4, VOCAB), -5.0)
    logits[range(4), [5, 6, 7, 8]] = 5.0
    hidden = hidden_for(dt_head(), [-50.0] * 4)
    requests, counts, _ = judged_tree_step(monkeypatch, autojudge, dt_head(), 0.5, manager, draft, logits, hidden,
                                           [0], end_id=EOS)
    assert (requests[0].tokens, counts[0], requests[0].py_num_accepted_draft_tokens_indices) == ([3, 4, 5, EOS], 1, [0])


def lookahead_head(H=8, seed=1):
    """A random judge of every target block: DT at the node, DT1 and DT2 at its greedy child and
    grandchild, LS from the logits after the node and after the child."""
    rng = np.random.default_rng(seed)
    F = 3 * H + 6
    return JudgeHead(rng.normal(size=F), rng.normal(size=F), rng.uniform(1, 2, size=F), 0.1, "DT-DT1-DT2-LS", 4, H)


@pytest.mark.parametrize("use_op", MODES)
@pytest.mark.parametrize("kind", ["tree", "chain"])
@pytest.mark.parametrize("seed", range(3))
def test_a_lookahead_judge_reads_the_greedy_children(monkeypatch, autojudge, seed, kind, use_op):
    """A target-only lookahead judge (DT-DT1-DT2-LS) on a static tree (the greedy child of a node is
    the node of its choice + [0]) or a chain (the next node), the drafter's last tokens padded:
    the step equals JudgeRule on a DraftTree of the drafted nodes + judge_relaxed + accept_tree on
    the same rows. Node 1 of request 0 mismatches, and the threshold cuts just above its judge logit."""
    rng = np.random.default_rng(200 + seed)
    spine = [[0] * (d + 1) for d in range(3 if kind == "tree" else 6)]  # node 1's greedy child and grandchild
    manager = FakeSpecTreeManager(spine + (random_choices(rng, int(rng.integers(5, 12))) if kind == "tree" else []))
    head = lookahead_head(seed=seed)
    draft, logits, hidden = random_tree_step(rng, manager)
    target_argmax = logits.argmax(-1).view(3, -1).numpy()  # [B, N+1]
    draft[0, 0] = (target_argmax[0, 0] + 1) % logits.shape[1]  # node 1 of request 0 mismatches: the judge decides
    N = manager.max_total_draft_tokens
    drafted = [N, N - 1, N - 2]  # the drafter's own tokens; the rest is its padding
    draft[1, N - 1:], draft[2, N - 2:] = 0, 0
    paths = manager.get_eagle_paths().numpy()  # [N+1, D+1]
    parents = [-1] + [int(row[np.flatnonzero(row >= 0)[-2]]) for row in paths[1:]]  # node n's parent from row n
    ranks = [0] + [c[-1] for c in manager.eagle_choices]
    judge_logit = np.full((3, N + 1), np.inf)  # [B, N+1]: JudgeRule's logits on the drafted nodes
    for b, k in enumerate(drafted):
        tree = DraftTree(tuple(parents[: k + 1]), tuple(ranks[: k + 1]))  # the drafted nodes only
        rows = slice(b * (N + 1), b * (N + 1) + k + 1)
        ctx = VerifyContext([3, 4], tree, draft[b : b + 1, :k], np.array([parents[: k + 1]]), logits[rows],
                            hidden[rows], None)
        judge_logit[b, : k + 1] = JudgeRule(head, 0.5).judge_logits(ctx)[0]
    decided = np.array([judge_logit[b, n] for b, k in enumerate(drafted) for n in range(1, k + 1)
                        if draft[b, n - 1] != target_argmax[b, parents[n]] and np.isfinite(judge_logit[b, n])])
    above = decided[decided > judge_logit[0, 1]]  # cut just above node 1's logit: it is judged, larger ones are not
    cut = (judge_logit[0, 1] + above.min()) / 2 if len(above) else judge_logit[0, 1] + 1
    threshold = float(np.float32(1 / (1 + np.exp(-cut))))  # the sampler passes float32 thresholds
    requests, counts, _ = judged_tree_step(monkeypatch, autojudge, head, threshold, manager if kind == "tree" else None,
                                           draft, logits, hidden, [0, 2, 1], drafted=drafted, use_op=use_op)
    acc = accept_tree(draft, target_argmax, np.broadcast_to(paths, (3, *paths.shape)),
                      judge_relaxed(judge_logit, threshold), np.array(drafted))  # on eagle_paths' rows, as the step
    assert acc.judged_count.sum() > 0
    for b, r in enumerate(requests):
        nodes = paths[acc.best_path[b], 1 : acc.accepted_len[b] + 1]
        kept = [int(n) - 1 for n in nodes] if kind == "tree" else []  # a chain keeps the stock rewind
        assert (r.tokens[2:], counts[b], r.py_num_accepted_draft_tokens_indices) == \
            (acc.tokens(b), int(acc.accepted_len[b]), kept)


def test_judges_and_trees_the_tree_path_cannot_take(monkeypatch, autojudge):
    """A judge that reads the draft's hidden states is refused when enabled, naming its setup, the
    blocks it reads and those the route feeds; so are dynamic trees and a tree larger than the draft."""
    fake_tensorrt_llm(monkeypatch)
    H = 8
    for setup, F, reads in (("DD-DT", 4 + H, "DD"), ("DT-DD1-LS", H + 4 + 6, "DD1")):
        head = JudgeHead(np.ones(F), np.zeros(F), np.ones(F), 0.0, setup, 4, H)
        with pytest.raises(ValueError, match=rf"judge setup {setup} reads {reads}, which the PyTorch backend cannot "
                                             rf"feed: .* the blocks DT, DT1, DT2, LS"):
            autojudge(head)
    manager = FakeSpecTreeManager(CHOICES[0])
    draft, logits, hidden = random_tree_step(np.random.default_rng(3), manager, B=1)
    manager.use_dynamic_tree = True
    with pytest.raises(RuntimeError, match="static draft trees only"):
        judged_tree_step(monkeypatch, autojudge, dt_head(), 0.5, manager, draft, logits, hidden, [0])
    from trtllm_autojudge.trt.pytorch.sampler import disable_autojudge

    disable_autojudge()
    manager.use_dynamic_tree = False
    with pytest.raises(RuntimeError, match="carries 2 draft tokens, but the static tree has 4 nodes"):
        judged_tree_step(monkeypatch, autojudge, dt_head(), 0.5, manager, draft[:, :2], logits[:3], hidden[:3], [0])


def test_the_example_and_the_docs_name_the_draft_with_speculative_model_dir():
    """DraftTargetDecodingConfig(speculative_model=...) exists only in later releases;
    speculative_model_dir is accepted by every 1.x release."""
    repo = Path(__file__).resolve().parents[1]
    tree = ast.parse((repo / "examples" / "pytorch_backend_llm_api.py").read_text())
    (call,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") ==
               "DraftTargetDecodingConfig"]
    assert {k.arg for k in call.keywords} == {"max_draft_len", "speculative_model_dir"}
    (eagle,) = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and getattr(n.func, "id", "") ==
                "EagleDecodingConfig"]  # the static tree: two-model EAGLE3, the one path 1.2 verifies trees on
    assert {k.arg for k in eagle.keywords} == {"max_draft_len", "speculative_model_dir", "eagle_choices",
                                              "eagle3_one_model"}
    assert [k.value.value for k in eagle.keywords if k.arg == "eagle3_one_model"] == [False]
    from trtllm_autojudge.trt.pytorch import sampler

    for text in (sampler.__doc__, (repo / "docs" / "deploy.md").read_text()):
        calls = re.findall(r"DraftTargetDecodingConfig\(([^)]*)\)", text)
        assert calls and all("speculative_model_dir=" in c and "speculative_model=" not in c for c in calls), calls
