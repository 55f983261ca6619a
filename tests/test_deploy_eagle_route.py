"""build-engines --route eagle and the EAGLE route's pure parts (no TensorRT-LLM here): the commands, the
autojudge_eagle block through checkpoint and engine configs, the refusals before anything is built (a
tree deeper or larger than the engine, eagle_choices that are not prefix-closed, a head for another
target, a judge the route does not run), the plugin inputs the model class takes from the stock helper's
arguments, and the executor's EagleConfig."""
import ast
import json
import re
import runpy
import shlex
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from eagle_heads import random_eagle_head
from tiny_models import tiny_pair
from dry_run import flag, read_dry_run
from trtllm_autojudge.decoding.dynamic_tree import DynamicTree
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.tasks import base as tasks_base
from trtllm_autojudge.tasks.builtin import Gsm8kProgramTask
from trtllm_autojudge.trt import eagle_model_cls_path
from trtllm_autojudge.trt.engine import eagle_spec
from trtllm_autojudge.trt.engine.eagle_convert import check_head_fits_target, write_eagle_config
from trtllm_autojudge.trt.engine.eagle_spec import EagleBlock, eagle_block
from trtllm_autojudge.trt.runner.eagle_executor import request_thresholds

REPO = Path(__file__).resolve().parents[1]
build_main = runpy.run_path(str(REPO / "build_scripts" / "build_engines.py"))["main"]
CHOICES = [[0], [1], [0, 0], [1, 0], [0, 0, 0]]


def judge_file(tmp_path, setup="DT", hidden=32):
    F = feature_dim(setup, hidden, hidden)
    path = tmp_path / f"judge-{setup}.safetensors"
    JudgeHead(np.ones(F), np.zeros(F), np.ones(F), 0.0, setup, hidden, hidden, 0.4).save(path)
    return str(path)


def dry_run(capsys, tmp_path, *tree, setup="DT"):
    argv = ["--route", "eagle", "--target_model_dir", "hf/target", "--eagle_head", "hf/head", "--judge",
            judge_file(tmp_path, setup), "--plugin_lib", "libautojudge_trt_plugin.so", "--output_dir",
            str(tmp_path / "out"), "--tp_size", "2", "--max_requests", "3", "--max_input_len", "100",
            "--max_new_tokens", "50", "--dry-run", *tree]
    assert build_main(argv) == 0
    return read_dry_run(capsys.readouterr().out)


def test_static_tree_dry_run(capsys, tmp_path):
    block, cmds = dry_run(capsys, tmp_path, "--eagle_choices", json.dumps(CHOICES))
    assert len(cmds) == 2
    convert, build = cmds
    assert convert[1:3] == ["-m", "trtllm_autojudge.trt.engine.eagle_convert"] and flag(convert, "--tp_size") == "2"
    assert flag(build, "--checkpoint_dir") == flag(convert, "--output_dir")
    assert flag(build, "--speculative_decoding_mode") == "eagle" and flag(build, "--use_paged_context_fmha") == "enable"
    assert Path(flag(build, "--model_cls_file")) == eagle_model_cls_path() and eagle_model_cls_path().is_file()
    assert flag(build, "--model_cls_name") == "AutoJudgeEagleForCausalLM"
    assert flag(build, "--max_seq_len") == str(100 + 50 + 5 + 1) and flag(build, "--max_batch_size") == "3"
    assert (block["max_draft_len"], block["num_eagle_layers"], block["max_non_leaves_per_layer"]) == (5, 3, 2)
    assert block["eagle_choices"] == CHOICES and block["dynamic_tree_top_k"] is None
    assert block["threshold"] == pytest.approx(0.4) and block["threshold_source"] == "request"
    classes = {n.name: n for n in ast.parse(eagle_model_cls_path().read_text()).body if isinstance(n, ast.ClassDef)}
    methods = {f.name for f in classes["AutoJudgeEagleForCausalLM"].body if isinstance(f, ast.FunctionDef)}
    assert {"_eagle_fwd_helper", "prepare_inputs", "__init__"} <= methods


def test_dynamic_tree_dry_run_and_a_file_of_choices(capsys, tmp_path):
    block, _ = dry_run(capsys, tmp_path, "--dynamic_tree", "--depth", "4", "--top_k", "3", "--max_draft_len", "12")
    assert (block["max_draft_len"], block["num_eagle_layers"], block["dynamic_tree_top_k"]) == (12, 4, 3)
    assert EagleBlock.from_dict(block).tree == DynamicTree(4, 3, 12)
    path = tmp_path / "choices.json"
    path.write_text(json.dumps(CHOICES))
    block, _ = dry_run(capsys, tmp_path, "--eagle_choices", str(path))
    assert EagleBlock.from_dict(block).tree == DraftTree.from_choices(CHOICES)


def test_the_example_trees_build(capsys, tmp_path):
    """examples/eagle_engine.sh: its static tree and its dynamic-tree flags pass build-engines' checks."""
    script = (REPO / "examples" / "eagle_engine.sh").read_text()
    dynamic, static = re.findall(r"TREE=\((.*)\)", script)
    block, _ = dry_run(capsys, tmp_path, *shlex.split(static))
    assert (block["max_draft_len"], block["num_eagle_layers"]) == (7, 4)
    block, _ = dry_run(capsys, tmp_path, *shlex.split(dynamic))
    assert EagleBlock.from_dict(block).tree == DynamicTree(4, 4, 24)


def test_trees_that_do_not_fit_are_refused_with_both_numbers(tmp_path):
    judge = judge_file(tmp_path)
    tree = DraftTree.from_choices(CHOICES)
    with pytest.raises(ValueError, match="3 levels deep, deeper than num_eagle_layers 2"):
        eagle_block(judge, "p.so", tree, num_eagle_layers=2)
    with pytest.raises(ValueError, match="has 5 nodes, more than max_draft_len 4"):
        eagle_block(judge, "p.so", tree, max_draft_len=4)
    with pytest.raises(ValueError, match="expands 3 nodes on one level, more than max_non_leaves_per_layer 2"):
        eagle_block(judge, "p.so", DynamicTree(3, 3, 9), max_non_leaves_per_layer=2)
    with pytest.raises(ValueError, match=r"not prefix-closed: \[\[1\]\] missing"):
        DraftTree.from_choices([[0], [1, 0]])
    with pytest.raises(ValueError, match="threshold must lie in"):
        eagle_block(judge, "p.so", tree, threshold=1.0)


def test_judges_the_route_does_not_run_are_refused(tmp_path):
    tree = DraftTree.from_choices(CHOICES + [[0, 0, 0, 0]])
    with pytest.raises(ValueError, match="does not run on the EAGLE route.*no draft model.*target-only"):
        eagle_block(judge_file(tmp_path, "DD-DT"), "p.so", tree)
    look = judge_file(tmp_path, "DT-DT1-DT2-LS")
    with pytest.raises(ValueError, match="knows only for a static tree"):
        eagle_block(look, "p.so", DynamicTree(4, 2, 8))
    block = eagle_block(look, "p.so", tree)  # a static tree: the greedy children are a constant of the engine
    assert eagle_spec.greedy_child_row(block).tolist() == [1, 3, 4, 5, -1, 6, -1]
    with pytest.raises(ValueError, match="--depth 2 gives no draft node a verdict"):
        eagle_block(look, "p.so", DraftTree.from_choices([[0], [0, 0]]))


def test_build_arguments_are_checked(tmp_path):
    base = ["--target_model_dir", "t", "--judge", judge_file(tmp_path), "--plugin_lib", "p", "--output_dir", "o",
            "--dry-run"]
    with pytest.raises(SystemExit):
        build_main(["--route", "eagle", *base])  # no head, no tree
    with pytest.raises(SystemExit):
        build_main(["--route", "eagle", "--eagle_head", "h", "--dynamic_tree", *base])  # no --top_k / --max_draft_len
    with pytest.raises(SystemExit):
        build_main(["--route", "stock", "--draft_model_dir", "d", "--eagle_choices", "[[0]]", *base])
    with pytest.raises(SystemExit):
        build_main(["--route", "stock", *base])  # the stock route needs a draft


def test_block_through_the_checkpoint_config(tmp_path):
    block = eagle_block(judge_file(tmp_path), "p.so", DraftTree.from_choices(CHOICES), max_draft_len=8,
                        num_eagle_layers=3, max_non_leaves_per_layer=4, threshold=0.2, threshold_source="engine")
    (tmp_path / "config.json").write_text(json.dumps({"architecture": "EagleForCausalLM", "max_draft_len": 63}))
    write_eagle_config(tmp_path, block)
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["max_draft_len"], config["num_eagle_layers"], config["max_non_leaves_per_layer"]) == (8, 3, 4)
    assert EagleBlock.from_engine_config({"pretrained_config": config}) == block
    assert EagleBlock.from_engine_config({"pretrained_config": {}}) is None
    with pytest.raises(ValueError, match="format 9"):
        EagleBlock.from_dict({**block.to_json(), "format": 9})


def test_head_for_another_target_is_refused_at_conversion(tmp_path):
    target, _ = tiny_pair(seed=0)
    target.model.save_pretrained(tmp_path / "target")
    random_eagle_head(target.model).save(tmp_path / "head")
    assert check_head_fits_target(tmp_path / "head", tmp_path / "target") == tmp_path / "head"
    other, _ = tiny_pair(seed=0, vocab=50)
    random_eagle_head(other.model).save(tmp_path / "other")
    with pytest.raises(ValueError, match="vocabulary: head 50 tokens, target 96"):
        check_head_fits_target(tmp_path / "other", tmp_path / "target")


def test_plugin_inputs_from_the_stock_helpers_arguments(tmp_path):
    fields = eagle_spec.eagle_plugin_fields(eagle_block(judge_file(tmp_path), "p.so", DraftTree.from_choices(CHOICES)),
                                            target_hidden=32)
    kwargs = {"draft_tokens": "DT", "draft_lens": "DL", "tree_params": SimpleNamespace(paths="P"), "input_ids": "I"}
    assert eagle_spec.plugin_inputs(kwargs, "L", "H", "T", None, fields["feature_blocks"]) == [
        "L", "H", "DT", "DL", "P", "T"]
    assert not eagle_spec.needs_greedy_child(fields)
    with pytest.raises(ValueError, match=r"lack \['paths'\]"):
        eagle_spec.plugin_inputs({**kwargs, "tree_params": None}, "L", "H", "T", None, fields["feature_blocks"])
    block = eagle_block(judge_file(tmp_path), "p.so", DraftTree.from_choices(CHOICES))
    with pytest.raises(ValueError, match="max_draft_len 5 and num_eagle_layers 3.*config has 63 and 4"):
        eagle_spec.check_build(use_cache=True, paged_kv_cache=True, remove_input_padding=True, gpt_attention_plugin=True,
                               max_draft_len=63, num_eagle_layers=4, pp_size=1, block=block)
    with pytest.raises(ValueError, match="paged KV cache.*packed input"):
        eagle_spec.check_build(use_cache=True, paged_kv_cache=False, remove_input_padding=False,
                               gpt_attention_plugin=True, max_draft_len=5, num_eagle_layers=3, pp_size=1, block=block)


def test_executor_eagle_config_and_request_thresholds(tmp_path):
    static = eagle_block(judge_file(tmp_path), "p.so", DraftTree.from_choices(CHOICES), threshold=0.3)
    assert eagle_spec.executor_eagle_config(static) == {"eagle_choices": CHOICES, "greedy_sampling": True,
                                                        "posterior_threshold": pytest.approx(0.3)}
    dynamic = eagle_block(judge_file(tmp_path), "p.so", DynamicTree(3, 2, 6))
    assert eagle_spec.executor_eagle_config(dynamic)["use_dynamic_tree"] is True
    assert request_thresholds(static, [0.1, None]) == [0.1, None]
    with pytest.raises(ValueError, match="refuses a posterior_threshold of 1 or more"):
        request_thresholds(static, [1.0])
    engine = eagle_block(judge_file(tmp_path), "p.so", DraftTree.from_choices(CHOICES), threshold_source="engine")
    with pytest.raises(ValueError, match="threshold_source engine"):
        request_thresholds(engine, [0.2])
    assert torch.equal(torch.tensor(eagle_spec.greedy_child_row(static)), torch.tensor([1, 3, 4, 5, -1, -1]))


def test_without_judge_the_route_takes_the_judge_of_the_shipped_heads_drafts(capsys, tmp_path, monkeypatch):
    """No --judge: the task's judge for its shipped EAGLE head's drafts, else its shipped judge; a
    missing file says how to make it, or to pass --judge."""
    monkeypatch.setattr(tasks_base, "ASSETS", tmp_path)
    argv = ["--route", "eagle", "--task", "gsm8k-program", "--target_model_dir", "hf/target", "--eagle_head",
            "hf/head", "--plugin_lib", "libautojudge_trt_plugin.so", "--output_dir", str(tmp_path / "out"),
            "--dry-run", "--eagle_choices", json.dumps(CHOICES)]
    eagle = Gsm8kProgramTask().shipped_eagle_judge_path()
    assert eagle.name == "judge_gsm8k_program_eagle.safetensors"
    with pytest.raises(FileNotFoundError, match=f"{eagle}, does not exist: make it with `trtllm-autojudge calibrate "
                                                f"--task gsm8k-program --draft eagle"):
        build_main(argv)
    judge_file(tmp_path)  # a DT judge
    (tmp_path / "judge-DT.safetensors").rename(eagle)
    assert build_main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert json.loads("\n".join(out[1:out.index("}") + 1]))["judge_file"] == str(eagle)
    monkeypatch.setattr(Gsm8kProgramTask, "shipped_eagle_judge", None)  # a task without one: the task's judge
    shipped = Gsm8kProgramTask().shipped_judge_path()
    eagle.rename(shipped)
    assert build_main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    assert json.loads("\n".join(out[1:out.index("}") + 1]))["judge_file"] == str(shipped)
