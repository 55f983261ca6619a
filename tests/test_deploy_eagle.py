"""The EAGLE route on CPU: TensorRT-LLM 1.2's EAGLE engine with the AutoJudge tree logits mode
(:class:`ReferenceEagleEngine`), driven by the route's loop the way the executor drives the engine,
gives the CPU runtime's tokens (speculative_generate with the EAGLE drafter and the same judge) token
for token and cycle for cycle, for static and dynamic trees, batched, with per-request thresholds; at
threshold 0 it is greedy decoding."""
import numpy as np
import pytest
import torch

from eagle_heads import first_layer_head
from tiny_models import EOS, VOCAB, tiny_pair
from trtllm_autojudge.decoding.dynamic_tree import DynamicTree
from trtllm_autojudge.decoding.eagle_drafter import EagleDrafter
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.trt.runner.eagle_engine import ReferenceEagleEngine
from trtllm_autojudge.trt.runner.eagle_loop import eagle_generate
from trtllm_autojudge.trt.runner.eagle_step import (EagleInput, assemble_step, context_step_entry,
                                                     generation_step_entry, spec_decoding_inputs)

MAX_NEW = 28
STATIC = DraftTree.from_choices([[0], [1], [0, 0], [0, 1], [1, 0], [0, 0, 0], [0, 0, 0, 0]])
TREES = [DraftTree.chain(3), STATIC, DynamicTree(3, 2, 6), DynamicTree(4, 3, 10)]


@pytest.fixture(scope="module")
def models():
    target, _ = tiny_pair(seed=0)
    return target, EagleDrafter(target, first_layer_head(target))


def prompts(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, VOCAB, (int(torch.randint(1, 10, (1,), generator=g)),), generator=g).tolist() for _ in range(n)]


def judge(target, setup="DT", bias=-0.2, seed=0):
    rng = np.random.default_rng(seed)
    F = feature_dim(setup, target.hidden_size, target.hidden_size)
    return JudgeHead(0.05 * rng.normal(size=F), np.zeros(F), np.ones(F), bias, setup, target.hidden_size,
                     target.hidden_size, 0.5)


def engine_for(target, drafter, tree, head=None, slack=0):
    depth = tree.depth if isinstance(tree, DynamicTree) else tree.max_depth
    return ReferenceEagleEngine(target, drafter, tree, max_draft_len=tree.num_nodes + slack,
                                num_eagle_layers=depth + slack, judge=head)


def runtime_cycles(result):
    return [c.accepted for c in result.cycles]


@pytest.mark.parametrize("tree", TREES, ids=str)
def test_stock_engine_is_greedy_and_equals_the_runtime(models, tree):
    target, drafter = models
    batch = prompts(3)
    out = eagle_generate(engine_for(target, drafter, tree, slack=1), batch, thresholds=0.0, max_new_tokens=MAX_NEW,
                         stop_ids=[EOS])
    for prompt, res in zip(batch, out):
        assert res.tokens == greedy_generate(target, prompt, MAX_NEW)
        ref = speculative_generate(target, drafter, prompt, tree=tree, max_new_tokens=MAX_NEW)
        assert runtime_cycles(res) == runtime_cycles(ref) and [c.draft_nodes for c in res.cycles] == [
            c.draft_nodes for c in ref.cycles]


@pytest.mark.parametrize("tree", TREES, ids=str)
@pytest.mark.parametrize("setup", ["DT", "DT-DT1-DT2-LS"])
def test_judged_engine_equals_the_runtime_with_per_request_thresholds(models, tree, setup):
    target, _ = models
    if isinstance(tree, DynamicTree) and setup != "DT":
        pytest.skip("a lookahead judge runs on static trees only on this route (refusal tested below)")
    assert engine_equals_rule(models, tree, judge(target, setup), [0.5, 0.0, 0.3, 0.7]) > 0  # logits were rewritten


def engine_equals_rule(models, tree, head, thresholds) -> int:
    """Assert the engine decodes each request as the runtime with JudgeRule at its threshold (greedy
    decoding at 0); return the judged acceptances."""
    target, drafter = models
    batch = prompts(len(thresholds), seed=5)
    out = eagle_generate(engine_for(target, drafter, tree, head), batch, thresholds=thresholds, max_new_tokens=MAX_NEW,
                         stop_ids=[EOS])
    judged = 0
    for prompt, t, res in zip(batch, thresholds, out):
        ref = speculative_generate(target, drafter, prompt, tree=tree, rule=JudgeRule(head, t), max_new_tokens=MAX_NEW)
        assert res.tokens == ref.tokens and runtime_cycles(res) == runtime_cycles(ref), f"threshold {t}"
        judged += len(ref.judged_tokens)
        if t == 0.0:
            assert res.tokens == greedy_generate(target, prompt, MAX_NEW)
    return judged


@pytest.mark.parametrize("tree", [STATIC, DynamicTree(4, 3, 10)], ids=str)
def test_judged_engine_applies_the_judges_minimum_run(models, tree):
    """The engine passes the judge's minimum run to the tree rewrite, as the plugin's min_run field
    does: it equals the runtime with JudgeRule, whose judgeable nodes open at least that many tokens."""
    head = judge(models[0], "DT", bias=0.5)
    head = JudgeHead(head.coef, head.mean, head.scale, head.intercept, head.setup, head.draft_hidden,
                     head.target_hidden, head.threshold, meta={"min_run": 2})
    assert engine_equals_rule(models, tree, head, [0.5, 0.6, 0.7, 0.8]) > 0


def test_refusals(models):
    target, drafter = models
    with pytest.raises(ValueError, match="4 levels deep, deeper than num_eagle_layers 3.*7 nodes, more than max_draft_len 5"):
        ReferenceEagleEngine(target, drafter, STATIC, max_draft_len=5, num_eagle_layers=3)
    with pytest.raises(ValueError, match="knows only for a static tree"):
        engine_for(target, drafter, DynamicTree(3, 2, 6), judge(target, "DT-DT1-DT2-LS"))
    F = feature_dim("DD-DT", target.hidden_size, target.hidden_size)
    dd = JudgeHead(np.zeros(F), np.zeros(F), np.ones(F), 0.0, "DD-DT", target.hidden_size, target.hidden_size, 0.5)
    with pytest.raises(ValueError, match="does not run on the EAGLE route.*no draft model"):
        engine_for(target, drafter, STATIC, dd)
    with pytest.raises(ValueError, match="--depth 2 gives no draft node a verdict"):
        engine_for(target, drafter, DraftTree.static([2, 1]), judge(target, "DT-DT1-DT2-LS"))


def test_the_engine_checks_the_tree_inputs_against_the_paths(models):
    target, drafter = models
    engine = engine_for(target, drafter, STATIC)
    first = engine.step(assemble_step([0], [context_step_entry([5, 6, 7], engine.max_draft_len, engine.max_path_len)],
                                      np.zeros(1)))
    x = first.tensors
    step = assemble_step([0], [generation_step_entry(int(x["accepted_tokens"][0, 0]), x["next_draft_tokens"][0],
                                                     int(x["next_draft_lens"][0]), x["next_draft_paths"][0])], np.zeros(1))
    step.tensors[EagleInput.SPEC_DECODING_POSITION_OFFSETS.value][0, 1] += 1
    with pytest.raises(ValueError, match="spec_decoding_position_offsets does not describe the draft_paths"):
        engine.step(step)


def test_spec_decoding_inputs_pack_ancestors_bit_by_bit():
    tree = DraftTree.static([2, 1])  # 0 -> 1, 2; 1 -> 3; 2 -> 4
    paths = np.full((1, 40, 3), -1, np.int32)
    paths[0, : len(tree.paths)] = tree.paths
    lengths, offsets, mask = spec_decoding_inputs(paths, np.array([4]))
    assert lengths.tolist() == [5] and offsets[0, :5].tolist() == [0, 1, 1, 2, 2]
    assert mask.shape == (40, 2)  # ceil(40 / 32) words per node
    assert [int(m) for m in mask[:5, 0]] == [0b1, 0b11, 0b101, 0b1011, 0b10101] and not mask[:, 1].any()


def trtllm_tree_tensors(choices: list[list[int]], max_path_len: int):
    """TensorRT-LLM's ``initTensorsFromChoices`` + ``computePathsAndMask``
    (cpp/tensorrt_llm/runtime/utils/speculativeChoicesUtils.cpp, 04a2cac), step for step: choices
    sorted by (depth, prefix); node ci + 1 is sorted choice ci, its parent the node of its prefix;
    position offsets the depths; a depth-first walk with a stack (children pushed in index order)
    copies each parent's mask row, sets the diagonal, and writes the k-th leaf it meets to path row
    numPaths - 1 - k. Returns (parents, offsets, paths [P, max_path_len], mask rows as ints)."""
    order = sorted(range(len(choices)), key=lambda i: (len(choices[i]), choices[i]))
    parents, linear = [-1], {(): 0}
    for ci, index in enumerate(order, start=1):
        choice = tuple(choices[index])
        linear[choice] = ci
        parents.append(linear[choice[:-1]])
    children = [[n for n in range(1, len(parents)) if parents[n] == m] for m in range(len(parents))]
    num_paths = sum(1 for c in children if not c)
    paths = np.full((num_paths, max_path_len), -1, np.int32)
    mask, depth, stack, k = [0] * len(parents), [0] * len(parents), [0], 0
    while stack:
        ci = stack.pop()
        if ci:
            mask[ci] = mask[parents[ci]]
            depth[ci] = depth[parents[ci]] + 1
        mask[ci] |= 1 << ci
        if not children[ci]:
            node = ci
            while node:
                paths[num_paths - 1 - k, depth[node]] = node
                node = parents[node]
            paths[num_paths - 1 - k, 0] = 0
            k += 1
        stack.extend(children[ci])
    return parents, depth, paths, mask


def random_choices(rng, nodes: int) -> list[list[int]]:
    choices = [[0]]
    while len(choices) < nodes:
        parent = choices[int(rng.integers(len(choices)))] if rng.random() < 0.8 else []
        ranks = {c[-1] for c in choices if c[:-1] == parent}
        choices.append(parent + [min(set(range(len(ranks) + 1)) - ranks)])
    rng.shuffle(choices)
    return choices


def test_static_trees_number_nodes_and_order_paths_as_tensorrt_llm():
    """DraftTree.from_choices and the step's tree inputs against the runtime's own construction: the
    same node numbering, depths, path rows in the same order (the lowest row wins a tie of equally
    long paths, in acceptDraftTokensByIdsWithPaths and in the CPU runtime) and packed mask."""
    rng = np.random.default_rng(0)
    for _ in range(300):
        choices = random_choices(rng, int(rng.integers(1, 40)))
        tree = DraftTree.from_choices(choices)
        parents, depth, paths, mask = trtllm_tree_tensors(choices, tree.max_depth + 1)
        assert list(tree.parents) == parents and tree.depths.tolist() == depth, choices
        assert tree.paths.tolist() == paths.tolist(), choices
        M = tree.num_nodes + 1
        rows = np.full((1, M, tree.max_depth + 1), -1, np.int32)  # [1, M, D+1]: the engine's path rows
        rows[0, : len(paths)] = paths
        _, offsets, packed = spec_decoding_inputs(rows, np.array([tree.num_nodes]))
        assert offsets[0].tolist() == depth
        words = packed.view(np.uint32).astype(np.int64)
        assert [sum(int(w) << (32 * i) for i, w in enumerate(row)) for row in words[:M]] == mask, choices
