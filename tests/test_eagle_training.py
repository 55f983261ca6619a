"""EAGLE head training (models/eagle_training.py, build_scripts/train_eagle.py) on a tiny random target:
alpha per depth equals what the drafter accepts, the loss falls, a stopped run resumes as if it had
not stopped, and the script's options."""
import json
import runpy
from pathlib import Path

import numpy as np
import pytest
import torch

from eagle_heads import first_layer_head, random_eagle_head
from tiny_models import VOCAB, tiny_pair
from trtllm_autojudge.data.batches import batch_examples
from trtllm_autojudge.decoding.eagle_drafter import EagleDrafter
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.models.eagle_training import (EagleTraining, alpha_counts, chain_lengths, pack_pairs, pair_loss,
                                                    teacher_states, train_head, unrolled_features)

REPO = Path(__file__).resolve().parents[1]
PAD = 0


@pytest.fixture(scope="module")
def target():
    return tiny_pair(seed=0)[0]


def greedy_sequences(target, n, seed=3, new=24):
    g = torch.Generator().manual_seed(seed)
    out = []
    for _ in range(n):
        prompt = torch.randint(3, VOCAB, (int(torch.randint(2, 8, (1,), generator=g)),), generator=g).tolist()
        out.append((prompt + greedy_generate(target, prompt, new), len(prompt)))
    return out


def states(target, ids):
    with torch.no_grad():
        return target.model.model(input_ids=torch.tensor([ids])).last_hidden_state[0]  # [L, H]


@torch.inference_mode()
def chain_reference(head, lm_head, ids, start, hidden, depth):
    """One chain at a time through the head's session, as the drafter drafts a chain: context pairs
    0..p, then per depth the pair (last feature, the drafted token) while the draft is right."""
    right = []
    for p in range(max(start - 1, 0), len(ids) - 2):
        session, n = head.session(), 0
        feature = session.forward(ids[1:p + 2], hidden[:p + 1], range(p + 1))[-1:]  # [1, H]
        for d in range(1, depth + 1):
            if p + d + 1 > len(ids) - 1 or int(lm_head(feature).argmax()) != ids[p + d + 1]:
                break
            n += 1
            feature = session.forward([ids[p + d + 1]], feature, [p + d])
        right.append(n)
    return right


@pytest.mark.parametrize("make_head", [first_layer_head, lambda t: random_eagle_head(t.model, 2, seed=1)],
                         ids=["first_layer", "random"])
def test_chain_lengths_equal_one_chain_at_a_time(target, make_head):
    head = make_head(target)
    for ids, start in greedy_sequences(target, 3):
        hidden = states(target, ids)
        positions, right = chain_lengths(head, target.model.lm_head, ids, start, hidden, 4)
        assert positions.tolist() == list(range(start - 1, len(ids) - 2))
        assert right.tolist() == chain_reference(head, target.model.lm_head, ids, start, hidden, 4)


def test_chain_lengths_are_what_a_lossless_eagle_loop_accepts(target):
    """Each cycle of speculative_generate with the EAGLE drafter and a chain of D accepts the chain
    length at the position before its root (the first cycle is the prefill)."""
    head, depth = first_layer_head(target), 3
    for ids, start in greedy_sequences(target, 3, seed=5):
        prompt = ids[:start]
        out = speculative_generate(target, EagleDrafter(target, head), prompt, tree=DraftTree.chain(depth),
                                   max_new_tokens=len(ids) - start)
        assert prompt + out.tokens == ids
        positions, right = chain_lengths(head, target.model.lm_head, ids, start, states(target, ids), depth)
        lengths = dict(zip(positions.tolist(), right.tolist()))
        committed, checked = start + 1, 0
        for cycle in out.cycles[1:]:
            p = committed - 2
            if p + depth + 1 <= len(ids) - 1:
                assert cycle.accepted == lengths[p], (p, cycle)
                checked += 1
            committed += cycle.accepted + 1
        assert checked > 0
        counts = alpha_counts(positions, right, len(ids), depth)
        assert (counts[:, 0] <= counts[:, 1]).all() and (counts[1:, 1] <= counts[:-1, 1]).all()


def test_pairs_pack_sequences_apart(target):
    batch = [([5, 6, 7, 8, 9], 2), ([10, 11, 12], 1)]
    pairs = pack_pairs(*teacher_states(target.model, batch, PAD))
    assert pairs.tokens.tolist() == [6, 7, 8, 9, 11, 12] and pairs.positions.tolist() == [0, 1, 2, 3, 0, 1]
    assert pairs.learn.tolist() == [False, True, True, True, True, True]  # from pair start - 1 on
    assert not pairs.mask[4, :4].any() and pairs.mask[5, 4:6].all() and not pairs.mask[1, 2]
    hidden = states(target, [5, 6, 7, 8, 9])
    assert torch.allclose(pairs.hidden[:4], hidden[:4], atol=1e-5) and torch.allclose(pairs.target[:4], hidden[1:],
                                                                                       atol=1e-5)


def training_run(target, tmp_path, name, steps, stop_after=None, dtype=torch.float32):
    train = greedy_sequences(target, 8, seed=7, new=16)
    batches = batch_examples(train, 4, seed=0)
    head = random_eagle_head(target.model, 1, seed=2).float()
    settings = EagleTraining(steps=steps, lr=3e-3, warmup=2, depth=3, eval_every=4, save_every=100, seed=1)
    state = train_head(head, target.model, batches, greedy_sequences(target, 2, seed=11), PAD, settings,
                       tmp_path / f"{name}.pt", dtype, stop_after)
    return head, state


def test_a_stopped_run_resumes_where_it_stopped(target, tmp_path):
    straight, full = training_run(target, tmp_path, "straight", 6)
    _, first = training_run(target, tmp_path, "resumed", 6, stop_after=4)
    assert first["step"] == 4 and not first["done"] and (tmp_path / "resumed.pt").is_file()
    resumed, second = training_run(target, tmp_path, "resumed", 6)
    assert second["done"] and second["history"] == full["history"] and second["alphas"] == full["alphas"]
    for (name, a), (_, b) in zip(straight.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), name
    assert [a["step"] for a in full["alphas"]] == [0, 4, 6] and len(full["alphas"][-1]["alpha"]) == 3


def test_the_loss_falls_and_the_embedding_stays_the_targets(target, tmp_path):
    head, state = training_run(target, tmp_path, "long", 40)
    losses = [h["loss"] for h in state["history"]]
    assert np.mean(losses[-5:]) < 0.8 * np.mean(losses[:5])
    assert torch.equal(head.embed_tokens.weight, target.model.get_input_embeddings().weight.float())


def test_bf16_autocast_runs(target, tmp_path):
    _, state = training_run(target, tmp_path, "bf16", 2, dtype=torch.bfloat16)
    assert state["done"] and all(np.isfinite(h["loss"]) for h in state["history"])


def test_script_options():
    parse = runpy.run_path(str(REPO / "build_scripts" / "train_eagle.py"))["parse_args"]
    args = parse(["--task", "gsm8k-program", "--steps", "5", "--stop-after", "2", "--work", "w"])
    assert args.steps == 5 and args.stop_after == 2 and args.layers == 1 and args.cls_weight == 0.1
    assert args.unroll == 1 and parse(["--unroll", "3"]).unroll == 3
    for bad in (["--noise", "-1"], ["--unroll", "0"]):
        with pytest.raises(SystemExit):
            parse(bad)


@pytest.mark.parametrize("make_head", [first_layer_head, lambda t: random_eagle_head(t.model, 2, seed=1)],
                         ids=["first_layer", "random"])
def test_unrolled_features_are_the_drafters_features_at_each_depth(target, make_head):
    """Depth k of the unrolled training forward at position i equals the feature a chain drafted
    from p = i - k + 1 reaches at depth k through the head's session (true tokens, as teacher forcing)."""
    head, unroll = make_head(target), 3
    batch = [(ids, start) for ids, start in greedy_sequences(target, 3, seed=13, new=10)]
    pairs = pack_pairs(*teacher_states(target.model, batch, PAD))
    with torch.no_grad():
        features = unrolled_features(head, pairs, pairs.hidden.float(), unroll)
    offset = 0
    for ids, _ in batch:
        hidden = states(target, ids)
        for p in range(len(ids) - 1):
            session = head.session()
            feature = session.forward(ids[1:p + 2], hidden[:p + 1], range(p + 1))[-1:]  # depth 1 at position p
            for k in range(1, unroll + 1):
                i = p + k - 1
                if i > len(ids) - 2:
                    break
                assert torch.allclose(features[k - 1][offset + i], feature[0], atol=1e-4), (p, k)
                if i + 1 <= len(ids) - 2:
                    feature = session.forward([ids[i + 2]], feature, [i + 1])
        offset += len(ids) - 1


def test_an_unrolled_loss_trains_and_reads_depth_one_as_the_recipe(target):
    batch = greedy_sequences(target, 2, seed=17, new=12)
    pairs = pack_pairs(*teacher_states(target.model, batch, PAD))
    head = random_eagle_head(target.model, 1, seed=3).float()
    one = pair_loss(head, target.model.lm_head, pairs, 0.0, 0.1, torch.Generator().manual_seed(0), unroll=1)
    two = pair_loss(head, target.model.lm_head, pairs, 0.0, 0.1, torch.Generator().manual_seed(0), unroll=2)
    assert one[0].requires_grad and two[0].requires_grad and two[1] != one[1]
    two[0].backward()
    assert head.fc.weight.grad is not None and head.fc.weight.grad.abs().sum() > 0


def test_the_report_has_alpha_per_evaluation_with_the_loss_before_it_and_a_plot(tmp_path):
    write_report = runpy.run_path(str(REPO / "build_scripts" / "train_eagle.py"))["write_report"]
    history = [{"loss": float(i), "reg": 1.0, "cls": 2.0} for i in range(1, 7)]
    state = {"step": 6, "done": False, "history": history,
             "alphas": [{"step": 0, "alpha": [0.0, None]}, {"step": 4, "alpha": [0.5, 0.25]}, {"step": 6, "alpha": [0.6, None]}]}
    write_report(tmp_path / "r.json", {"task": "t"}, state, 3)
    report = json.loads((tmp_path / "r.json").read_text())
    assert [e["loss"] for e in report["evaluations"]] == [None, 2.5, 5.5]  # steps 1-4, then 5-6
    assert report["evaluations"][1]["alpha"] == [0.5, 0.25] and report["heldout_sequences"] == 3
    assert (tmp_path / "r.png").read_bytes()[:4] == b"\x89PNG"
