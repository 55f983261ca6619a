"""Engine build commands (build_scripts/build_engines.py): the judge each route runs (the task's when
--judge is not given) and the setups it refuses, and the target's autojudge config block and inputs."""
import ast
import importlib.util
import json
import runpy
from pathlib import Path

import numpy as np
import pytest

from dry_run import flag, read_dry_run
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.tasks import base as tasks_base
from trtllm_autojudge.tasks.builtin import Gsm8kCotTask, Gsm8kProgramTask
from trtllm_autojudge.trt import draft_model_cls_path, model_cls_path
from trtllm_autojudge.trt.engine.convert import parse_args as convert_args
from trtllm_autojudge.trt.engine.convert import write_autojudge_block, write_draft_block
from trtllm_autojudge.trt.engine.draft_spec import DRAFT_BLOCK_KEY, DRAFT_HIDDEN_OUTPUT, engine_hidden_output
from trtllm_autojudge.trt.engine.io_spec import (BLOCK_KEY, DRAFT_HIDDEN, GREEDY_CHILD, PLUGIN_INPUT_OF, EngineBlock,
                                                  accept_engine_inputs, engine_block)
from trtllm_autojudge.trt.plugin.contract import plugin_io_names
from trtllm_autojudge.trt.plugin.fields import engine_plugin_fields

REPO = Path(__file__).resolve().parents[1]
build_main = runpy.run_path(str(REPO / "build_scripts" / "build_engines.py"))["main"]


def judge_file(tmp_path, setup="DT"):
    F = feature_dim(setup, 16, 32)
    path = tmp_path / f"judge-{setup}.safetensors"
    JudgeHead(np.ones(F), np.zeros(F), np.ones(F), 0.0, setup, 16, 32).save(path)
    return str(path)


def dry_run(capsys, tmp_path, *extra, setup="DT"):
    argv = ["--draft_model_dir", "hf/draft", "--target_model_dir", "hf/target", "--judge", judge_file(tmp_path, setup),
            "--plugin_lib", "libautojudge_trt_plugin.so", "--output_dir", str(tmp_path / "out"), "--dry-run", *extra]
    assert build_main(argv) == 0
    return read_dry_run(capsys.readouterr().out)


def test_dry_run_prints_convert_and_build_commands(capsys, tmp_path):
    block, cmds = dry_run(capsys, tmp_path, "--tp_size", "4", "--depth", "6", "--width", "3", "--max_requests", "2",
                          "--max_input_len", "100", "--max_new_tokens", "50")
    assert len(cmds) == 4
    conv_draft, conv_target, build_draft, build_target = cmds
    for conv in (conv_draft, conv_target):
        assert conv[1:3] == ["-m", "trtllm_autojudge.trt.engine.convert"] and flag(conv, "--tp_size") == "4"
    assert "--autojudge_block" in conv_target and "--autojudge_block" not in conv_draft
    assert build_draft[0] == build_target[0] == "trtllm-build"
    assert flag(build_draft, "--checkpoint_dir") == flag(conv_draft, "--output_dir")
    assert flag(build_target, "--checkpoint_dir") == flag(conv_target, "--output_dir")
    assert "--model_cls_file" not in build_draft
    assert Path(flag(build_target, "--model_cls_file")) == model_cls_path() and model_cls_path().is_file()
    assert flag(build_target, "--model_cls_name") == "AutoJudgeLLaMAForCausalLM"
    assert flag(build_target, "--kv_cache_type") == "disabled"
    assert flag(build_target, "--remove_input_padding") == "enable"
    # chain tree depth 6, width 3: 18 nodes, 13 paths (12 leaf siblings + the chain's end), D+1 = 7
    assert (block["max_draft_nodes"], block["max_paths"], block["max_path_len"], block["max_requests"]) == (18, 13, 7, 2)
    assert flag(build_target, "--max_batch_size") == str(2 * 13)  # one context row per path per request
    longest = 100 + 50 + 6
    assert flag(build_target, "--max_input_len") == flag(build_target, "--max_seq_len") == str(longest)
    assert flag(build_target, "--max_num_tokens") == str(2 * 13 * longest)
    assert flag(build_draft, "--max_batch_size") == "2" and flag(build_draft, "--max_seq_len") == str(longest)
    assert Path(block["judge_file"]).is_absolute() and Path(block["plugin_library"]).is_absolute()
    assert "--draft_hidden_output" not in conv_draft  # a DT judge: the stock draft engine


def test_dd_dt_judge_builds_the_draft_that_returns_its_hidden_states(capsys, tmp_path):
    _, cmds = dry_run(capsys, tmp_path, "--depth", "6", "--max_input_len", "100", "--max_new_tokens", "50",
                      setup="DD-DT")
    conv_draft, conv_target, build_draft, build_target = cmds
    assert "--draft_hidden_output" in conv_draft and "--draft_hidden_output" not in conv_target
    assert Path(flag(build_draft, "--model_cls_file")) == draft_model_cls_path() and draft_model_cls_path().is_file()
    assert flag(build_draft, "--model_cls_name") == "AutoJudgeDraftLLaMAForCausalLM"
    assert flag(build_draft, "--checkpoint_dir") == flag(conv_draft, "--output_dir")
    assert "--kv_cache_type" not in build_draft  # the paged cache: the base model then returns its hidden states
    # a context that ends at any draft node (prefix + one path) fits, and generates one token
    longest = 100 + 50 + 6
    assert flag(build_draft, "--max_input_len") == str(longest) and flag(build_draft, "--max_seq_len") == str(longest + 1)
    assert Path(flag(build_target, "--model_cls_file")) == model_cls_path()
    # the file trtllm-build loads defines the class the command names
    tree = ast.parse(draft_model_cls_path().read_text())
    assert "AutoJudgeDraftLLaMAForCausalLM" in {n.name for n in tree.body if isinstance(n, ast.ClassDef)}


@pytest.mark.parametrize("setup", ["DT", "DD-DT"])
def test_a_tree_draft_is_built_to_return_its_generation_logits(capsys, tmp_path, setup):
    """The leaf siblings of a chain tree (--width > 1) come from the draft's generation logits. The
    Triton backend never sets ExecutorConfig.gather_generation_logits, so only a draft built with
    --gather_generation_logits returns them; a chain needs no logits."""
    _, cmds = dry_run(capsys, tmp_path, "--width", "2", setup=setup)
    assert "--gather_generation_logits" in cmds[2] and "--gather_generation_logits" not in cmds[3]
    _, cmds = dry_run(capsys, tmp_path, setup=setup)
    assert "--gather_generation_logits" not in cmds[2]
    _, cmds = dry_run(capsys, tmp_path, "--route", "stock", "--depth", "4")
    assert not any("--gather_generation_logits" in cmd for cmd in cmds)  # chains, exact-match acceptance


def test_dry_run_needs_the_judge_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="feature setup decides how the engines are built"):
        build_main(["--draft_model_dir", "d", "--target_model_dir", "t", "--judge", str(tmp_path / "missing"),
                    "--plugin_lib", "p", "--output_dir", str(tmp_path), "--dry-run"])


@pytest.mark.parametrize("route", ["context", "stock"])
def test_a_judge_the_plugin_cannot_compute_is_refused_naming_the_route(tmp_path, route):
    """Every route judges with the plugin: offline-only blocks (TT) and a per-response limit in the
    judge's default operating point (calibrate --max-judged) are refused before anything is built; a
    minimum run (calibrate --min-run) is not: the plugin applies it (its min_run field)."""
    name = f"the {route} route"
    for setup, meta, why in [("DT-TT", {}, "the TensorRT plugin computes the blocks"),
                             ("DT-DT1-DT2-LS", {"max_judged": 3}, "limits a response to 3 judged acceptances")]:
        F = feature_dim(setup, 16, 32)
        path = tmp_path / f"judge-{setup}-{len(meta)}.safetensors"
        JudgeHead(np.ones(F), np.zeros(F), np.ones(F), 0.0, setup, 16, 32, meta=meta).save(path)
        with pytest.raises(ValueError, match=f"judge setup {setup} does not run on {name}: .*{why}.*"
                                             f"{name[0].upper() + name[1:]} runs"):
            build_main(["--route", route, "--draft_model_dir", "d", "--target_model_dir", "t", "--judge", str(path),
                        "--plugin_lib", "p", "--output_dir", str(tmp_path), "--dry-run"])
    path = tmp_path / "judge-min-run.safetensors"
    F = feature_dim("DT-DT1-DT2-LS", 16, 32)
    JudgeHead(np.ones(F), np.zeros(F), np.ones(F), 0.0, "DT-DT1-DT2-LS", 16, 32, meta={"min_run": 4}).save(path)
    assert build_main(["--route", route, "--draft_model_dir", "d", "--target_model_dir", "t", "--judge", str(path),
                       "--plugin_lib", "p", "--output_dir", str(tmp_path), "--dry-run"]) == 0
    assert engine_plugin_fields(path, 5, target_hidden=32)["min_run"].tolist() == [4]


def task_judge_dry_run(capsys, tmp_path, route, *task):
    argv = ["--route", route, *task, "--draft_model_dir", "hf/draft", "--target_model_dir", "hf/target", "--plugin_lib",
            "libautojudge_trt_plugin.so", "--output_dir", str(tmp_path / "out"), "--depth", "4", "--dry-run"]
    assert build_main(argv) == 0
    out = capsys.readouterr().out.splitlines()
    return json.loads("\n".join(out[1:out.index("}") + 1]))["judge_file"]


@pytest.mark.parametrize("route", ["stock", "context"])
def test_without_judge_a_route_takes_the_tasks_judge(capsys, tmp_path, monkeypatch, route):
    """No --judge: every route takes the task's shipped judge (target-only for gsm8k-program, so the stock
    route runs it too); a missing file says how to make it, or to pass --judge."""
    monkeypatch.setattr(tasks_base, "ASSETS", tmp_path)
    shipped = Gsm8kProgramTask().shipped_judge_path()
    assert shipped.name == "judge_gsm8k_program.safetensors"
    with pytest.raises(FileNotFoundError, match=f"{shipped}, does not exist: make it with `python build_scripts/"
                                                f"make_judge.py --task gsm8k-program .*--setups DT-DT1-DT2-LS.*, "
                                                f"or pass --judge PATH"):
        task_judge_dry_run(capsys, tmp_path, route, "--task", "gsm8k-program")
    F = feature_dim("DT-DT1-DT2-LS", 16, 32)
    JudgeHead(np.ones(F), np.zeros(F), np.ones(F), 0.0, "DT-DT1-DT2-LS", 16, 32).save(shipped)
    assert task_judge_dry_run(capsys, tmp_path, route, "--task", "gsm8k-program") == str(shipped)
    given = judge_file(tmp_path, "DT")  # --judge wins over the task's
    assert task_judge_dry_run(capsys, tmp_path, route, "--task", "gsm8k-program", "--judge", given) == given


def test_a_task_without_a_judge_asks_for_one(tmp_path, monkeypatch):
    monkeypatch.setattr(tasks_base, "ASSETS", tmp_path)
    with pytest.raises(FileNotFoundError, match="task code ships no judge: pass --judge PATH "
                                                "\\(a judge file of target-only setups"):
        task_judge_dry_run(None, tmp_path, "stock", "--task", "code")


def test_the_stock_route_refuses_a_tasks_judge_that_reads_the_draft(tmp_path, monkeypatch):
    """gsm8k-cot's judge reads the draft's hidden states (DD-DT): the stock route refuses it, naming the route."""
    monkeypatch.setattr(tasks_base, "ASSETS", tmp_path)
    shipped = Gsm8kCotTask().shipped_judge_path()
    F = feature_dim("DD-DT", 16, 32)
    JudgeHead(np.ones(F), np.zeros(F), np.ones(F), 0.0, "DD-DT", 16, 32).save(shipped)
    with pytest.raises(ValueError, match="judge setup DD-DT does not run on the stock route"):
        task_judge_dry_run(None, tmp_path, "stock", "--task", "gsm8k-cot")


def test_draft_block_round_trip_through_checkpoint_and_engine_config(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps({"architecture": "LlamaForCausalLM", "hidden_size": 16}))
    write_draft_block(tmp_path)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architecture"] == "LlamaForCausalLM"
    assert engine_hidden_output({"pretrained_config": config}) == DRAFT_HIDDEN_OUTPUT == DRAFT_HIDDEN
    assert engine_hidden_output({"pretrained_config": {"architecture": "LlamaForCausalLM"}}) is None  # stock draft
    with pytest.raises(ValueError, match="reconvert the draft"):
        engine_hidden_output({"pretrained_config": {DRAFT_BLOCK_KEY: {"format": 0, "hidden_output": "x"}}})
    assert convert_args(["--model_dir", "m", "--output_dir", "o", "--draft_hidden_output"]).draft_hidden_output
    with pytest.raises(SystemExit):  # a checkpoint is the target or the draft, not both
        convert_args(["--model_dir", "m", "--output_dir", "o", "--draft_hidden_output", "--autojudge_block", "b"])


def test_dry_run_chain_defaults(capsys, tmp_path):
    block, cmds = dry_run(capsys, tmp_path)
    assert (block["max_draft_nodes"], block["max_paths"], block["max_path_len"]) == (8, 1, 9)
    assert flag(cmds[0], "--tp_size") == flag(cmds[1], "--tp_size") == "1"
    _, cmds = dry_run(capsys, tmp_path, "--tp_size", "2", "--draft_tp_size", "1")
    assert (flag(cmds[0], "--tp_size"), flag(cmds[1], "--tp_size")) == ("1", "2")


@pytest.mark.skipif(importlib.util.find_spec("tensorrt_llm") is not None, reason="tensorrt_llm is installed here")
def test_real_build_without_tensorrt_llm_says_what_is_missing(capsys, tmp_path):
    argv = ["--draft_model_dir", "d", "--target_model_dir", "t", "--judge", "j", "--plugin_lib", "p",
            "--output_dir", str(tmp_path)]
    assert build_main(argv) == 2
    err = capsys.readouterr().err
    assert "tensorrt-llm==1.2" in err and "--dry-run" in err
    assert not (tmp_path / "autojudge_block.json").exists()


def test_bad_arguments_are_refused(tmp_path):
    with pytest.raises(SystemExit):
        build_main(["--draft_model_dir", "d", "--target_model_dir", "t", "--judge", "j", "--plugin_lib", "p",
                    "--output_dir", str(tmp_path), "--depth", "0", "--dry-run"])


def test_block_round_trip_through_checkpoint_and_engine_config(tmp_path):
    block = engine_block("j.safetensors", "lib.so", max_requests=4, max_draft_nodes=8, max_paths=5, max_path_len=5)
    (tmp_path / "config.json").write_text(json.dumps({"architecture": "LlamaForCausalLM", "hidden_size": 64}))
    write_autojudge_block(tmp_path, block)
    config = json.loads((tmp_path / "config.json").read_text())
    assert config["architecture"] == "LlamaForCausalLM"
    assert EngineBlock.from_dict(config[BLOCK_KEY]) == block
    # trtllm-build copies the checkpoint config into the engine's config.json as pretrained_config
    assert EngineBlock.from_engine_config({"pretrained_config": config, "build_config": {}}) == block
    assert block.max_rows == 20


def test_block_errors_say_what_to_change():
    with pytest.raises(ValueError, match="no 'autojudge' block"):
        EngineBlock.from_dict(None)
    with pytest.raises(ValueError, match="unknown keys"):
        EngineBlock.from_dict({"judge_file": "j", "plugin_library": "p", "max_requests": 1, "max_draft_nodes": 2,
                               "max_paths": 1, "max_path_len": 3, "colour": "red"})
    with pytest.raises(ValueError, match="max_path_len"):
        EngineBlock("j", "p", 1, 2, 1, 4)
    with pytest.raises(ValueError, match="not an AutoJudge target engine"):
        EngineBlock.from_engine_config({"pretrained_config": {}})
    with pytest.raises(FileNotFoundError, match="convert the checkpoint first"):
        write_autojudge_block("/nonexistent-dir", EngineBlock("j", "p", 1, 2, 1, 3))


def setup_fields(setup, block):
    """The plugin fields of a judge of ``setup`` (Hd 16, Ht 32) for the engine ``block`` describes."""
    F = feature_dim(setup, 16, 32)
    head = JudgeHead(np.ones(F), np.zeros(F), np.ones(F), 0.0, setup, 16, 32)
    return engine_plugin_fields(head, block.max_path_len, target_hidden=32, draft_hidden=16)


def test_engine_inputs_spec():
    block = EngineBlock("j", "p", max_requests=4, max_draft_nodes=6, max_paths=3, max_path_len=4)
    dt = {s.name: s for s in accept_engine_inputs(block, setup_fields("DT", block))}
    assert list(dt) == ["autojudge_node_rows", "autojudge_draft_tokens", "autojudge_draft_lens", "autojudge_paths",
                        "autojudge_threshold"]
    assert dict(dt["autojudge_node_rows"].dims)["autojudge_node_rows"] == (1, 14, 28)  # B*(N+1) = 28
    assert dt["autojudge_paths"].shape == (-1, -1, 4)
    assert dict(dt["autojudge_paths"].dims)["autojudge_path_len"] == (4, 4, 4)
    assert dt["autojudge_threshold"].dtype == "float32"
    ddt = {s.name: s for s in accept_engine_inputs(block, setup_fields("DD-DT", block))}
    assert ddt["autojudge_draft_hidden"].shape == (-1, 16) and ddt["autojudge_draft_hidden"].dtype == "model"
    assert GREEDY_CHILD not in ddt
    # a lookahead judge adds the greedy children [B, N+1]; one that also reads the draft, both, in plugin order
    ahead = {s.name: s for s in accept_engine_inputs(block, setup_fields("DT-DT1-DT2-LS", block))}
    assert list(ahead) == list(dt) + [GREEDY_CHILD] and ahead[GREEDY_CHILD].dtype == "int32"
    assert ahead[GREEDY_CHILD].shape == (-1, -1)
    assert dict(ahead[GREEDY_CHILD].dims) == {"autojudge_batch": (1, 2, 4), "autojudge_nodes_and_root": (1, 4, 7)}
    shipped = setup_fields("DD-DT-DT1-DT2-DD1-LS", block)
    assert [s.name for s in accept_engine_inputs(block, shipped)] == list(dt) + [DRAFT_HIDDEN, GREEDY_CHILD]
    # each engine input feeds the plugin input of the same place (the model class hands them over in that order)
    names, _ = plugin_io_names(shipped)
    engine_inputs = [spec.name for spec in accept_engine_inputs(block, shipped)]  # node rows first: the gather
    assert [PLUGIN_INPUT_OF.get(n) for n in names] == [None, None] + engine_inputs[1:]
    for spec in accept_engine_inputs(block, shipped):  # every dimension is named with a [min, opt, max] range
        assert len(spec.dims) == len(spec.shape) and all(lo <= opt <= hi for _, (lo, opt, hi) in spec.dims)


@pytest.mark.parametrize("setup, draft_hidden", [("DT-DT1-DT2-LS", False), ("DD-DT-DT1-DT2-DD1-LS", True)])
def test_lookahead_judges_build_on_the_context_route(capsys, tmp_path, setup, draft_hidden):
    """Every setup runs on the context route; the draft returns its hidden states exactly when a block
    reads them (DD1 included)."""
    _, (conv_draft, _, build_draft, build_target) = dry_run(capsys, tmp_path, "--depth", "4", setup=setup)
    assert ("--draft_hidden_output" in conv_draft) == draft_hidden == ("--model_cls_file" in build_draft)
    assert Path(flag(build_target, "--model_cls_file")) == model_cls_path()
    with pytest.raises(ValueError, match="--depth 2 gives no draft node a verdict: .* build with --depth 3 or more"):
        dry_run(capsys, tmp_path, "--depth", "2", setup=setup)
