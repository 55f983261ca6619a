"""`--draft eagle:HEAD`: an EAGLE head as the CLI's drafter (eval, calibrate, bench), its file without
the target's embedding, and the judges it takes."""
import argparse
import json

import numpy as np
import pytest
import torch

from eagle_heads import first_layer_head
from tiny_models import tiny_pair
from trtllm_autojudge.decoding.dynamic_tree import DynamicTree
from trtllm_autojudge.decoding.eagle_drafter import EagleDrafter
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.evaluation import common
from trtllm_autojudge.evaluation.certificate import pair_fingerprint
from trtllm_autojudge.evaluation.methods import OperatingPoint
from trtllm_autojudge.evaluation.runner import Question, run_points, tree_parents
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.mining.eagle_predictions import NO_DRAFT, EaglePredictions
from trtllm_autojudge.mining.miner import LabelMiner, MiningConfig
from trtllm_autojudge.mining.run import local_regenerator
from trtllm_autojudge.models.eagle_head import load_eagle_head, random_eagle_head
from trtllm_autojudge.decoding.loading import load_pair
from trtllm_autojudge.models.loading import add_model_args
from trtllm_autojudge.tasks import load_task


class _Tokenizer:
    eos_token_id = 2

    def get_vocab(self):
        return {f"t{i}": i for i in range(8)}


@pytest.fixture()
def saved(tmp_path, monkeypatch):
    """A tiny HF target folder, a random head for it as a directory and as a file without embedding."""
    import transformers

    target, _ = tiny_pair(seed=0)
    target.model.save_pretrained(tmp_path / "target")
    monkeypatch.setattr(transformers.AutoTokenizer, "from_pretrained", staticmethod(lambda *a, **k: _Tokenizer()))
    head = random_eagle_head(target.model, num_layers=1, seed=4)
    head.save(tmp_path / "head")
    head.save_without_embedding(tmp_path / "head.safetensors", dtype=torch.float32)
    return tmp_path, target


def _args(folder, draft, *extra):
    p = argparse.ArgumentParser()
    add_model_args(p)
    return p.parse_args(["--target", str(folder / "target"), "--draft", draft, "--dtype", "float32", *extra])


def test_an_eagle_head_drafts_for_the_cli_and_lossless_stays_greedy(saved):
    folder, _ = saved
    target, draft, _ = load_pair(_args(folder, f"eagle:{folder / 'head'}"))
    assert isinstance(draft, EagleDrafter) and draft.hidden_size is None
    prompt = [3, 5, 7, 9]
    for tree in (DraftTree.chain(4), DraftTree.static([2, 2, 1])):
        res = speculative_generate(target, draft, prompt, tree=tree, max_new_tokens=24)
        assert res.tokens == greedy_generate(target, prompt, 24)


def test_a_head_file_without_embedding_loads_as_its_directory(saved):
    folder, target = saved
    _, full, _ = load_pair(_args(folder, f"eagle:{folder / 'head'}"))
    _, compact, _ = load_pair(_args(folder, f"eagle:{folder / 'head.safetensors'}"))
    assert compact.fingerprint() == full.fingerprint()
    with pytest.raises(ValueError, match="stores no embed_tokens.weight .*load it with the target's embedding"):
        load_eagle_head(folder / "head.safetensors", hidden_size=target.hidden_size, vocab_size=target.vocab_size)


def test_the_pair_fingerprint_names_the_head(saved, tmp_path):
    folder, target = saved
    random_eagle_head(target.model, num_layers=1, seed=5).save(tmp_path / "other")
    loaded, a, _ = load_pair(_args(folder, f"eagle:{folder / 'head'}"))
    _, b, _ = load_pair(_args(folder, f"eagle:{tmp_path / 'other'}"))
    assert pair_fingerprint(loaded, a) != pair_fingerprint(loaded, b)


def test_a_head_that_is_not_there_or_not_a_head_is_refused_by_the_flag(saved, tmp_path):
    folder, _ = saved
    with pytest.raises(SystemExit, match="--draft eagle:.*no EAGLE head at"):
        load_pair(_args(folder, f"eagle:{tmp_path / 'missing'}"))
    with pytest.raises(SystemExit, match="--draft eagle: task gsm8k-cot ships no EAGLE head: give --draft eagle:HEAD"):
        load_pair(_args(folder, "eagle"), load_task("gsm8k-cot"))


def _judge(setup, target, path, draft_model="some draft"):
    F = feature_dim(setup, target.hidden_size, target.hidden_size)
    JudgeHead(np.zeros(F), np.zeros(F), np.ones(F), -1.0, setup, target.hidden_size, target.hidden_size, 0.5,
              meta={"draft_model": draft_model, "target_model": target.name}).save(path)
    return path


def test_an_eagle_drafter_takes_target_only_judges_of_any_draft_and_refuses_the_others(saved, tmp_path):
    folder, _ = saved
    target, draft, _ = load_pair(_args(folder, f"eagle:{folder / 'head'}"))
    judge = common.load_judge_file(_judge("DT-LS", target, tmp_path / "dt.safetensors"), target, draft)
    assert judge.setup == "DT-LS"
    with pytest.raises(SystemExit, match=r"setup DD-DT\) reads the draft's hidden states, and the EAGLE head .* has "
                                         r"none: give a target-only judge"):
        common.load_judge_file(_judge("DD-DT", target, tmp_path / "dd.safetensors"), target, draft)


def test_the_default_judge_with_the_shipped_head_is_the_one_calibrated_on_its_drafts(monkeypatch):
    task = load_task("gsm8k-program")
    args = argparse.Namespace(judge=None, target="tuned", draft="eagle")
    monkeypatch.setattr(type(task), "shipped_eagle_judge", None)
    assert common.judge_path(args, required=False, task=task) is None
    with pytest.raises(SystemExit, match="ships no judge for its EAGLE head's drafts: pass --judge PATH"):
        common.judge_path(args, required=True, task=task)


def test_the_shipped_eagle_judge_is_target_only_and_certified_on_the_heads_chains_of_5():
    task = load_task("gsm8k-program")
    path = common.judge_path(argparse.Namespace(judge=None, target="tuned", draft="eagle"), required=True, task=task)
    assert path.name == task.shipped_eagle_judge
    judge = JudgeHead.load(path)
    cert = judge.meta["certificate"]
    assert judge.setup == "DT" and judge.threshold == cert["threshold"]
    assert (cert["k"], cert["tree"], cert["max_new_tokens"]) == (5, None, 320)
    assert cert["questions"] >= 299 and cert["answers_changed"] == 0 and cert["answer_change_bound"] <= 0.01


def test_without_k_an_eagle_head_drafts_a_chain_as_deep_as_it_was_trained_and_a_model_one_of_8(saved):
    folder, target = saved
    _, head_drafter, _ = load_pair(_args(folder, f"eagle:{folder / 'head'}"))
    assert head_drafter.trained_depth is None  # a head whose metadata records no training
    trained = random_eagle_head(target.model, num_layers=1, seed=4, meta={"training": json.dumps({"unroll": 3})})
    assert trained.trained_depth == 3
    for drafter, given, expected in [(head_drafter, None, common.DEFAULT_K), (EagleDrafter(target, trained), None, 3),
                                     (EagleDrafter(target, trained), 5, 5), (tiny_pair(seed=0)[1], None, common.DEFAULT_K)]:
        args = argparse.Namespace(k=given, tree=None)
        common.settle_k(args, drafter)
        assert args.k == expected and common.draft_tree(args) == DraftTree.chain(expected)


def test_the_shipped_heads_default_chain_is_the_one_its_judge_is_certified_on():
    task = load_task("gsm8k-program")
    head = load_eagle_head(task.shipped_model_path("eagle_head"), hidden_size=576, vocab_size=49152,
                           embedding=torch.zeros(49152, 576))
    judge = JudgeHead.load(common.judge_path(argparse.Namespace(judge=None, target="tuned", draft="eagle"), required=True,
                                             task=task))
    assert head.trained_depth == judge.meta["certificate"]["k"]


@pytest.mark.parametrize("text, expected", [("dynamic:3,2,4", DynamicTree(3, 2, 4)), ("2,1", DraftTree.static([2, 1])),
                                            (None, DraftTree.chain(5))])
def test_tree_flag_reads_static_and_dynamic_trees(text, expected):
    tree = common.draft_tree(argparse.Namespace(tree=text, k=5))
    assert tree == expected
    assert tree_parents(tree) == (None if isinstance(tree, DynamicTree) else list(tree.parents))


@pytest.mark.parametrize("text, message", [("dynamic:3,2", "a dynamic tree is dynamic:DEPTH,TOP_K,NODES"),
                                           ("dynamic:3,4,2", "num_nodes >= top_k"), ("2,x", "invalid literal")])
def test_tree_flag_refuses_malformed_trees(text, message):
    with pytest.raises(SystemExit, match=message):
        common.draft_tree(argparse.Namespace(tree=text, k=5))


def test_eval_runs_an_eagle_head_over_dynamic_trees(saved, tmp_path):
    folder, _ = saved
    target, draft, _ = load_pair(_args(folder, f"eagle:{folder / 'head'}"))
    F = feature_dim("DT", target.hidden_size, target.hidden_size)
    judge = JudgeHead(np.zeros(F), np.zeros(F), np.ones(F), -5.0, "DT", target.hidden_size, target.hidden_size, 0.5)
    questions = [Question(f"q{i}", [3 + i, 5, 7], gold=None) for i in range(2)]
    runs = run_points(target, draft, lambda ids: " ".join(map(str, ids)), questions, [OperatingPoint.parse("judge@0.5")],
                      DynamicTree(3, 2, 4), _Checker(), tmp_path / "eval", judge, max_new_tokens=12, progress=False)
    by = {(r["spec"], r["qid"]): r for r in runs}
    for q in questions:
        assert by["lossless", q.qid]["tokens"] == greedy_generate(target, q.prompt_ids, 12)
        assert by["judge@0.5", q.qid]["judged_accepts"] > 0  # the judge (p = 0.007) accepts every mismatch


class _Checker:
    def answer(self, text, example=None):
        return text

    def same(self, a, b):
        return a == b

    def is_final(self, text):
        return False


def test_an_eagle_heads_teacher_forced_drafts_are_its_cycles_first_drafts():
    """EaglePredictions entry j: the depth-1 draft of the drafter's cycle rooted at seq[j] (the
    speculative loop's proposal after the target read seq[: j + 1])."""
    target, _ = tiny_pair(seed=3)
    drafter = EagleDrafter(target, first_layer_head(target))
    seq = [3, 5, 7, 9, 11, 13, 15, 17]
    preds = EaglePredictions(drafter, target).predictions(seq)
    assert len(preds) == len(seq) and preds[0] == NO_DRAFT
    hidden = target.session().forward(seq).hidden  # [L, H]: the target's states
    for j in range(1, len(seq)):
        session = drafter.start()
        prefill = session.propose(seq[:1], DraftTree.chain(1))  # nothing to draft from before the prefill
        session.commit(seq[: j + 1], prefill, [], hidden[:j])  # the states of the j tokens before the root seq[j]
        assert preds[j] == int(session.propose(seq[: j + 1], DraftTree.chain(1)).node_tokens[0]), j


def test_labels_mine_along_an_eagle_heads_drafts(tmp_path):
    target, _ = tiny_pair(seed=3)
    drafter = EagleDrafter(target, first_layer_head(target))
    miner = LabelMiner(target, drafter, _Checker(), lambda ids: " ".join(map(str, ids)), MiningConfig(max_new_tokens=12))
    record = miner.mine([3, 5, 7])
    preds = EaglePredictions(drafter, target).predictions
    assert record["labels"], "the head mismatches the target somewhere"
    for position, _, target_token, draft_token in record["labels"]:
        assert draft_token != target_token
    first = record["labels"][0]  # mined on the target's own response
    assert preds(record["prompt_ids"] + record["response_ids"])[first[0] - 1] == first[3]
    with pytest.raises(ValueError, match="lookup-draft regenerator arbitrates with a draft model; the EAGLE head"):
        local_regenerator("lookup-draft", target, drafter)


def test_features_of_an_eagle_heads_labels_say_what_to_give_instead(tmp_path):
    from trtllm_autojudge.mining.features_cli import main as features

    (tmp_path / "labels.jsonl").write_text(json.dumps({"id": "a", "prompt_ids": [3], "response_ids": [4],
                                                       "final_ids": [3, 4], "labels": []}) + "\n")
    with pytest.raises(SystemExit, match="give --draft embedded .* with --setup DT"):
        features(["--labels", str(tmp_path / "labels.jsonl"), "--out", str(tmp_path / "f.safetensors"),
                  "--draft", "eagle:head"])
