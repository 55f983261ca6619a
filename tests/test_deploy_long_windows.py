"""Long draft windows on the engine routes (issue 62): weight streaming in the build commands and the
runner, and a 64-token window through each route's loop on the reference engines."""
import dataclasses
import re
import runpy
from pathlib import Path

import numpy as np
import pytest

from dry_run import flag, read_dry_run
from tiny_models import EOS, VOCAB, tiny_pair
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.trt.runner.executor_calls import check_gpu_weights_percent
from trtllm_autojudge.trt.runner.loop import engine_generate
from trtllm_autojudge.trt.runner.reference_engine import ReferenceDrafter, ReferenceStockTarget, ReferenceTargetEngine
from trtllm_autojudge.trt.runner.stock_loop import stock_generate

REPO = Path(__file__).resolve().parents[1]
build_main = runpy.run_path(str(REPO / "build_scripts" / "build_engines.py"))["main"]
K = 64
MAX_NEW = 72  # a full window, then another started


def judge_file(tmp_path, setup="DT"):
    F = feature_dim(setup, 16, 32)
    path = tmp_path / f"judge-{setup}.safetensors"
    JudgeHead(np.ones(F), np.zeros(F), np.ones(F), 0.0, setup, 16, 32).save(path)
    return str(path)


ROUTE_ARGS = {
    "context": ["--draft_model_dir", "hf/draft", "--depth", str(K)],
    "stock": ["--route", "stock", "--draft_model_dir", "hf/draft", "--depth", str(K)],
    "eagle": ["--route", "eagle", "--eagle_head", "hf/head", "--dynamic_tree", "--depth", "8", "--top_k", "4",
              "--max_draft_len", str(K)],
}


def dry_run(capsys, tmp_path, route, *extra):
    argv = ["--target_model_dir", "hf/target", "--judge", judge_file(tmp_path), "--plugin_lib", "libplugin.so",
            "--output_dir", str(tmp_path / "out"), "--max_input_len", "100", "--max_new_tokens", "50", "--dry-run",
            *ROUTE_ARGS[route], *extra]
    assert build_main(argv) == 0
    return read_dry_run(capsys.readouterr().out)


@pytest.mark.parametrize("route", sorted(ROUTE_ARGS))
def test_weight_streaming_builds_the_target_only_with_the_gemm_plugin_off(capsys, tmp_path, route):
    """`--weight_streaming`: the target's trtllm-build gets --weight_streaming and --gemm_plugin
    disable (only non-plugin weights stream); every other command is as without it."""
    _, plain = dry_run(capsys, tmp_path, route)
    _, streamed = dry_run(capsys, tmp_path, route, "--weight_streaming")
    assert streamed[:-1] == plain[:-1]  # conversions and the draft build: unchanged
    target = streamed[-1]
    assert target[0] == "trtllm-build" and flag(target, "--output_dir").endswith("engines/target")
    assert "--weight_streaming" in target and flag(target, "--gemm_plugin") == "disable"
    assert [w for w in target if w != "--weight_streaming"] == [
        "disable" if i > 0 and plain[-1][i - 1] == "--gemm_plugin" else w for i, w in enumerate(plain[-1])]
    assert all("--weight_streaming" not in cmd for cmd in streamed[:-1])


def test_streaming_the_drafts_weights_is_refused_with_the_reason(capsys, tmp_path):
    with pytest.raises(SystemExit):
        dry_run(capsys, tmp_path, "stock", "--weight_streaming", "draft")
    assert "the draft runs K steps per cycle" in capsys.readouterr().err


@pytest.mark.parametrize("route", sorted(ROUTE_ARGS))
def test_every_route_builds_a_64_token_window(capsys, tmp_path, route):
    block, cmds = dry_run(capsys, tmp_path, route)
    target = cmds[-1]
    if route == "context":
        assert (block["max_draft_nodes"], block["max_path_len"]) == (K, K + 1)
        assert flag(target, "--max_seq_len") == str(100 + 50 + K)
    elif route == "stock":
        assert block["max_draft_len"] == K and flag(target, "--max_draft_len") == str(K)
        assert flag(target, "--max_seq_len") == str(100 + 50 + K + 1)
    else:
        assert block["max_draft_len"] == K and flag(target, "--max_seq_len") == str(100 + 50 + K + 1)


def test_gpu_weights_percent_is_a_share_the_engine_can_take():
    streaming = {"build_config": {"weight_streaming": True}}
    assert check_gpu_weights_percent(0.25, streaming, "e") == 0.25 and check_gpu_weights_percent(0.0, streaming, "e") == 0
    assert check_gpu_weights_percent(1.0, {"build_config": {}}, "e") == 1.0  # the default suits any engine
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match=r"give a number in \[0, 1\]"):
            check_gpu_weights_percent(bad, streaming, "e")
    with pytest.raises(ValueError, match="e was built without weight streaming.*build-engines --weight_streaming"):
        check_gpu_weights_percent(0.5, {"build_config": {"weight_streaming": False}}, "e")


def test_run_engines_refuses_a_share_outside_0_1(capsys):
    from trtllm_autojudge.trt.runner.engines import parse_args

    assert parse_args(["--target_engine_dir", "t", "--tokenizer_dir", "k", "--gpu_weights_percent", "0.3"]
                      ).gpu_weights_percent == 0.3
    with pytest.raises(SystemExit):
        parse_args(["--target_engine_dir", "t", "--tokenizer_dir", "k", "--gpu_weights_percent", "2"])
    assert "--gpu_weights_percent is the share of the target's streamable weights" in capsys.readouterr().err


@pytest.fixture(scope="module")
def pair64():
    target, draft = tiny_pair(seed=0)
    target.model.double()
    draft.model.double()
    return target, draft


def head_with_min_run(target, draft, min_run):
    rng = np.random.default_rng(0)
    F = feature_dim("DT", draft.hidden_size, target.hidden_size)
    head = JudgeHead(rng.normal(size=F), np.zeros(F), np.ones(F), 0.0, "DT", draft.hidden_size, target.hidden_size)
    return dataclasses.replace(head, meta={**head.meta, "min_run": min_run})


def test_a_64_token_window_through_the_context_and_stock_loops_equals_the_runtime(pair64):
    """K = 64 with a minimum run: the context route's engine loop and the stock route's draft-target
    loop, on the reference engines, decode each request as the Python runtime with JudgeRule."""
    target, draft = pair64
    head = head_with_min_run(target, draft, 3)
    rng = np.random.default_rng(3)
    batch = [rng.integers(3, VOCAB, size=int(rng.integers(1, 9))).tolist() for _ in range(2)]
    thresholds = [0.0, 0.6]
    tree = DraftTree.chain(K)
    context = engine_generate(ReferenceDrafter(draft), ReferenceTargetEngine(target, head), batch, tree=tree,
                              thresholds=thresholds, max_new_tokens=MAX_NEW, stop_ids=[EOS])
    judged = 0
    for prompt, t, res in zip(batch, thresholds, context):
        ref = speculative_generate(target, draft, prompt, tree=tree, rule=JudgeRule(head, t), max_new_tokens=MAX_NEW)
        stock = stock_generate(ReferenceDrafter(draft), ReferenceStockTarget(target, head, t), [prompt], depth=K,
                               max_new_tokens=MAX_NEW, stop_ids=[EOS])[0]
        for out in (res, stock):
            assert out.tokens == ref.tokens and [c.accepted for c in out.cycles] == [c.accepted for c in ref.cycles]
        assert max(c.draft_nodes for c in ref.cycles) == K  # the window was drafted whole
        judged += sum(c.judged for c in ref.cycles)
        if t == 0.0:
            assert res.tokens == greedy_generate(target, prompt, MAX_NEW)
    assert judged > 0


def test_triton_repositories_carry_the_targets_gpu_weights_percent(tmp_path, capsys):
    """make-triton-repo --gpu_weights_percent: the stock route's target model gets the backend's
    gpu_weights_percent parameter (the draft keeps its own default), the context route's
    autojudge_target model gets it for its Session; a share outside [0, 1], or on the CPU route, is
    refused."""
    from test_deploy_triton import model_config_pb2, parse, release_templates
    from trtllm_autojudge.trt.triton.make_repo import main as make_repo

    pb2 = model_config_pb2()
    checkout = release_templates(tmp_path / "TensorRT-LLM")
    engines = ["--draft_engine_dir", str(tmp_path / "e/draft"), "--target_engine_dir", str(tmp_path / "e/target"),
               "--tokenizer_dir", str(tmp_path / "hf")]
    assert make_repo(["--route", "stock", "--output_dir", str(tmp_path / "stock"), "--backend_models_dir", str(checkout),
                      *engines, "--gpu_weights_percent", "0.25"]) == 0
    target = parse(pb2, (tmp_path / "stock/tensorrt_llm/config.pbtxt").read_text())
    draft = parse(pb2, (tmp_path / "stock/tensorrt_llm_draft/config.pbtxt").read_text())
    assert target.parameters["gpu_weights_percent"].string_value == "0.25"
    assert draft.parameters["gpu_weights_percent"].string_value == "${gpu_weights_percent}"  # unset: 1.0
    assert make_repo(["--output_dir", str(tmp_path / "context"), *engines, "--gpu_weights_percent", "0.5"]) == 0
    context = parse(pb2, (tmp_path / "context/autojudge_target/config.pbtxt").read_text())
    assert context.parameters["gpu_weights_percent"].string_value == "0.5"
    for bad, message in [(["--gpu_weights_percent", "1.5"], r"give a number in \[0, 1\], got 1.5"),
                         (["--route", "cpu", "--gpu_weights_percent", "0.5"], "--route cpu runs no engines: drop "
                                                                               "--gpu_weights_percent")]:
        with pytest.raises(SystemExit):
            make_repo(["--output_dir", str(tmp_path / "bad"), *(engines if "cpu" not in bad else []), *bad])
        assert re.search(message, capsys.readouterr().err)
