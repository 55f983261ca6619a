"""The EAGLE drafter in the reference loop: lossless == greedy on static and dynamic trees, every
drafted node equals a fresh head computation (masks, positions, cache), the EAGLE-2 selection rule,
target-only judges only, and the model drafter's behaviour behind the same interface."""
import numpy as np
import pytest
import torch

from eagle_heads import first_layer_head, random_eagle_head
from tiny_models import VOCAB, tiny_pair
from trtllm_autojudge.decoding.drafter import Drafter
from trtllm_autojudge.decoding.dynamic_tree import Candidates, DynamicTree, top_tokens
from trtllm_autojudge.decoding.eagle_drafter import EagleDrafter
from trtllm_autojudge.decoding.model_drafter import ModelDrafter
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead, feature_dim

MAX_NEW = 32
TREES = [DraftTree.chain(1), DraftTree.chain(4), DraftTree.static([2, 2, 1]), DraftTree.static([3, 1, 2]),
         DynamicTree(1, 3, 3), DynamicTree(3, 2, 6), DynamicTree(4, 3, 10), DynamicTree(3, 3, 21)]


@pytest.fixture(scope="module")
def target():
    return tiny_pair(seed=0)[0]


@pytest.fixture(scope="module", params=["first-layer", "random"])
def drafter(request, target):
    head = first_layer_head(target) if request.param == "first-layer" else random_eagle_head(target.model, 1, seed=3)
    return EagleDrafter(target, head)


def prompts(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, VOCAB, (int(torch.randint(1, 12, (1,), generator=g)),), generator=g).tolist() for _ in range(n)]


def dt_head(target, bias=-0.2, seed=0, setup="DT"):
    rng = np.random.default_rng(seed)
    F = feature_dim(setup, target.hidden_size, target.hidden_size)
    return JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), bias, setup, target.hidden_size,
                     target.hidden_size, 0.5)


@pytest.mark.parametrize("tree", TREES, ids=str)
def test_lossless_equals_target_greedy(target, drafter, tree):
    for prompt in prompts(4):
        out = speculative_generate(target, drafter, prompt, tree=tree, max_new_tokens=MAX_NEW)
        assert out.tokens == greedy_generate(target, prompt, MAX_NEW)
        first, rest = out.cycles[0], out.cycles[1:]
        assert first.draft_nodes == 0 and first.accepted == 0  # the prefill cycle: nothing to draft from yet
        depth = tree.depth if isinstance(tree, DynamicTree) else tree.max_depth
        assert all(c.draft_forwards == depth and c.judged == 0 for c in rest)  # one head forward per level
        if isinstance(tree, DynamicTree):
            assert all(c.draft_nodes == min(tree.num_nodes, tree.max_candidates) for c in rest)


def test_the_first_layer_head_drafts_tokens_the_target_accepts(target):
    out = [speculative_generate(target, EagleDrafter(target, first_layer_head(target)), p, tree=DynamicTree(3, 2, 6),
                                max_new_tokens=MAX_NEW) for p in prompts(4)]
    assert sum(c.accepted for r in out for c in r.cycles) > 20  # so the lossless tests walk real paths


class Recorder:
    """A rule that accepts every mismatch and keeps the trees and tokens it was shown."""

    needs_draft_hidden = False

    def __init__(self):
        self.seen = []

    def __call__(self, ctx):
        self.seen.append(ctx)
        relaxed = np.ones((1, ctx.tree.num_nodes + 1), bool)
        relaxed[0, 0] = False
        return relaxed


def fresh_features(head, target, prefix: list[int], path_tokens: list[int]) -> torch.Tensor:
    """The head's feature at the last pair, computed from nothing: the context pairs (target states
    of ``prefix[:-1]`` with the next tokens), then one pair per path token with its parent's feature."""
    with torch.inference_mode():
        h = target.model.model(input_ids=torch.tensor([prefix[:-1]])).last_hidden_state[0]  # [n-1, H]
        session = head.session()
        f = session.forward(prefix[1:], h, range(len(prefix) - 1))[-1]
        for d, t in enumerate(path_tokens, start=1):
            f = session.forward([t], f[None], [len(prefix) - 1 + d - 1])[0]
    return f


@pytest.mark.parametrize("tree", [DraftTree.static([2, 2, 1]), DynamicTree(3, 2, 6), DynamicTree(3, 3, 12)], ids=str)
def test_every_drafted_node_is_the_heads_choice_from_a_fresh_computation(target, tree):
    """Each node's token is its rank among the top tokens of lm_head(parent's feature), with the
    feature recomputed from scratch over the context and the path: pins masks, positions and cache."""
    head = first_layer_head(target)
    rec = Recorder()  # accepting every mismatch walks long paths, so later cycles start from many cache states
    speculative_generate(target, EagleDrafter(target, head), prompts(1, seed=3)[0], tree=tree, rule=rec,
                         max_new_tokens=16)
    checked = 0
    for ctx in rec.seen[1:4]:
        t = ctx.tree
        for n in range(1, t.num_nodes + 1):
            path = [int(ctx.draft_tokens[0, m - 1]) for m in t.path_to(n)]
            f = fresh_features(head, target, ctx.prefix, path[:-1])
            with torch.inference_mode():
                top = top_tokens(target.model.lm_head(f).float(), t.ranks[n] + 1)
            assert int(top[t.ranks[n]]) == path[-1], f"node {n} of {t}"
            checked += 1
    assert checked > 10


def test_dynamic_tree_is_the_best_candidates_of_the_expansion_rule():
    """Candidates by hand: the tree keeps the N best by score (shallower first on ties), every kept
    node's parent is kept, nodes are numbered in that order, and ranks are the parent's ranks."""
    g = torch.Generator().manual_seed(0)
    for trial in range(50):
        K, D, V = int(torch.randint(1, 4, (1,), generator=g)), int(torch.randint(1, 4, (1,), generator=g)), 12
        spec = DynamicTree(D, K, int(torch.randint(K, K + (D - 1) * K * K + 3, (1,), generator=g)))
        cands = Candidates([], [], [], [], [])
        lp = lambda: torch.log_softmax(torch.randn(V, generator=g, dtype=torch.float64).round(decimals=1), -1)  # noqa: E731
        expand = cands.add_children(-1, 0.0, 1, lp(), K)
        for depth in range(2, D + 1):
            layer = [i for c in expand for i in cands.add_children(c, cands.score[c], depth, lp(), K)]
            assert len(layer) == K * K
            expand = cands.best(layer, K)
        assert len(cands.token) == spec.max_candidates
        tree, tokens = cands.tree(spec.num_nodes)
        keys = sorted(range(len(cands.token)), key=lambda i: (-cands.score[i], cands.depth[i], i))
        chosen = keys[: spec.num_nodes]
        assert tree.num_nodes == min(spec.num_nodes, spec.max_candidates)
        assert tokens.tolist() == [cands.token[c] for c in chosen]
        for n, c in enumerate(chosen, start=1):
            assert tree.ranks[n] == cands.rank[c] and tree.depths[n] == cands.depth[c]
            p = cands.parent[c]
            assert (p < 0 and tree.parents[n] == 0) or chosen.index(p) + 1 == tree.parents[n]


def test_top_tokens_break_ties_to_the_lower_id():
    assert top_tokens(torch.tensor([1.0, 3.0, 3.0, 0.0, 3.0]), 4).tolist() == [1, 2, 4, 0]


@pytest.mark.parametrize("tree", [DraftTree.static([2, 1, 1]), DynamicTree(4, 2, 8)], ids=str)
@pytest.mark.parametrize("setup", ["DT", "DT-DT1-DT2-LS"])
def test_target_only_judges_run_and_the_fused_op_agrees(target, tree, setup):
    drafter = EagleDrafter(target, first_layer_head(target))
    head = dt_head(target, setup=setup)
    judged = 0
    for prompt in prompts(3, seed=5):
        ref = speculative_generate(target, drafter, prompt, tree=tree, rule=JudgeRule(head), max_new_tokens=MAX_NEW)
        op = speculative_generate(target, drafter, prompt, tree=tree, rule=JudgeRule(head), max_new_tokens=MAX_NEW,
                                  fused=True)
        assert op.tokens == ref.tokens
        assert [(c.accepted, c.judged) for c in op.cycles] == [(c.accepted, c.judged) for c in ref.cycles]
        judged += len(ref.judged_tokens)
    assert judged > 0


def test_a_judge_that_reads_the_draft_is_refused_with_an_eagle_drafter(target):
    F = feature_dim("DD-DT", target.hidden_size, target.hidden_size)
    head = JudgeHead(np.zeros(F), np.zeros(F), np.ones(F), 0.0, "DD-DT", target.hidden_size, target.hidden_size, 0.5)
    with pytest.raises(ValueError, match=r"DD-DT reads the draft's hidden states .*EAGLE head.*target-only judge"):
        speculative_generate(target, EagleDrafter(target, first_layer_head(target)), [5, 6], tree=DraftTree.chain(2),
                             rule=JudgeRule(head))


def test_a_head_for_another_target_is_refused(target):
    other = tiny_pair(seed=1, vocab=50)[0]
    with pytest.raises(ValueError, match="vocabulary: head 50 tokens, target 96"):
        EagleDrafter(target, random_eagle_head(other.model))
    head = random_eagle_head(target.model)
    head.meta["tokenizer"] = "aaaa"
    with pytest.raises(ValueError, match="tokenizer fingerprint: head aaaa, target's tokenizer bbbb"):
        EagleDrafter(target, head, tokenizer_fingerprint="bbbb")


def test_drafters_share_one_interface_and_the_model_drafter_refuses_dynamic_trees(target):
    _, draft = tiny_pair(seed=0)
    assert isinstance(ModelDrafter(draft), Drafter) and isinstance(EagleDrafter(target, first_layer_head(target)), Drafter)
    assert not isinstance(draft, Drafter)  # a bare language model is wrapped by speculative_generate
    with pytest.raises(ValueError, match="draft model drafts static trees"):
        speculative_generate(target, draft, [5, 6], tree=DynamicTree(2, 2, 4))
    a = speculative_generate(target, draft, [5, 6, 7], tree=DraftTree.static([2, 1]), max_new_tokens=MAX_NEW)
    b = speculative_generate(target, ModelDrafter(draft), [5, 6, 7], tree=DraftTree.static([2, 1]), max_new_tokens=MAX_NEW)
    assert a.tokens == b.tokens and [c.accepted for c in a.cycles] == [c.accepted for c in b.cycles]


def test_bad_dynamic_trees():
    with pytest.raises(ValueError, match="num_nodes >= top_k"):
        DynamicTree(3, 4, 2)
    with pytest.raises(ValueError, match="depth >= 1 and top_k >= 1"):
        DynamicTree(0, 1, 1)


def test_eagle_choices_make_the_static_tree_and_back():
    for tree in (DraftTree.chain(3), DraftTree.static([2, 2, 1]), DraftTree.static([3, 1, 2])):
        assert DraftTree.from_choices(tree.choices()) == tree
    tree = DraftTree.from_choices([[1], [0], [0, 0], [0], [1, 2]])  # unsorted, a duplicate: sorted by (length, choice)
    assert tree.parents == (-1, 0, 0, 1, 2) and tree.ranks == (0, 0, 1, 0, 2)
    with pytest.raises(ValueError, match=r"not prefix-closed: \[\[0\], \[0, 1\]\] missing"):
        DraftTree.from_choices([[1], [0, 1, 0]])
    with pytest.raises(ValueError, match="non-empty lists of ranks >= 0"):
        DraftTree.from_choices([[0], [-1]])
