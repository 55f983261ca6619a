"""The stock route on CPU: the target model class's insertion arguments, input names and fields
(checked without TensorRT), the build commands, and the executor draft-target loop driven by the
reference engines against the reference speculative loop (same tokens, same accepted counts)."""
import dataclasses
import json
import runpy
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from test_deploy_loop import pair64, prompts, random_head  # noqa: F401  (pair64 is a fixture)
from tiny_models import EOS
from dry_run import flag, read_dry_run
from trtllm_autojudge.decoding.modes import JudgeRule
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead, feature_dim
from trtllm_autojudge.trt import stock_model_cls_path
from trtllm_autojudge.trt.engine import stock_spec
from trtllm_autojudge.trt.engine.convert import parse_args as convert_args
from trtllm_autojudge.trt.engine.convert import write_stock_block
from trtllm_autojudge.trt.plugin.contract import (FIELD_DTYPES, LOGITS_INPUTS, OUTPUT_MODES, check_plugin_input_shapes,
                                                  plugin_io_names)
from trtllm_autojudge.trt.runner.reference_engine import ReferenceDrafter, ReferenceStockTarget
from trtllm_autojudge.trt.runner.stock_loop import stock_generate

REPO = Path(__file__).resolve().parents[1]
build_main = runpy.run_path(str(REPO / "build_scripts" / "build_engines.py"))["main"]
HD, HT = 16, 32
MAX_NEW = 16


def judge_file(tmp_path, setup="DT", threshold=0.4, seed=0):
    rng = np.random.default_rng(seed)
    F = feature_dim(setup, HD, HT)
    path = tmp_path / f"judge-{setup}.safetensors"
    JudgeHead(rng.normal(size=F), rng.normal(size=F), rng.uniform(0.5, 2, size=F), 0.1, setup, HD, HT,
              threshold=threshold).save(path)
    return path


# ---------------------------------------------------------------------------------------------
# The model class's insertion: block, fields, inputs, build checks, output swap.

def test_stock_block_fields_and_plugin_io(tmp_path):
    path = judge_file(tmp_path)
    block = stock_spec.stock_block(path, "lib.so", max_draft_len=6)
    assert block.threshold == pytest.approx(0.4) and block.max_draft_len == 6  # the judge file's threshold
    assert stock_spec.stock_block(path, "lib.so", max_draft_len=6, threshold=0.7).threshold == pytest.approx(0.7)
    fields = stock_spec.stock_plugin_fields(block, target_hidden=HT)
    assert list(fields) == list(FIELD_DTYPES)
    assert fields["output_mode"].tolist() == [OUTPUT_MODES["logits"]] and fields["feature_blocks"].tolist() == [0]
    assert fields["threshold"].tolist() == [np.float32(0.4)] and fields["max_path_len"].tolist() == [7]
    w, c = JudgeHead.load(path).folded()
    np.testing.assert_array_equal(fields["judge_weight"], w.astype(np.float32))
    np.testing.assert_allclose(fields["judge_bias"], [c], rtol=1e-6)
    names, outputs = plugin_io_names(fields)
    assert names == ("target_logits", "target_hidden", "input_ids", "last_token_ids", "host_request_types",
                     "host_context_lengths") == LOGITS_INPUTS[:-1]
    assert outputs == ("rewritten_logits",)
    with pytest.raises(ValueError, match="target hidden size 64"):
        stock_spec.stock_plugin_fields(block, target_hidden=64)
    for setup in ("DD-DT", "DT-DT1-DT2-DD1-LS"):  # a block reads the draft: refused, naming the setups it runs
        with pytest.raises(ValueError, match=f"judge setup {setup} does not run on the stock route: .* The stock route "
                                             f"runs target-only setups, of the blocks DT, DT1, DT2, LS"):
            stock_spec.stock_block(judge_file(tmp_path, setup), "lib.so", max_draft_len=6)
    with pytest.raises(ValueError, match="threshold must lie in"):
        stock_spec.StockBlock("j", "p", 1.5, 4)


def test_a_target_only_lookahead_judge_takes_the_same_six_stock_inputs(tmp_path):
    """DT-DT1-DT2-LS in logits mode: the plugin reads a draft row's lookahead blocks from the next draft
    rows of its sequence, so the engine feeds it the same six stock tensors as a DT judge."""
    path = judge_file(tmp_path, "DT-DT1-DT2-LS")
    block = stock_spec.stock_block(path, "lib.so", max_draft_len=5)
    fields = stock_spec.stock_plugin_fields(block, target_hidden=HT)
    assert fields["feature_blocks"].tolist() == [0, 2, 3, 5] and fields["draft_hidden"].tolist() == [0]
    assert fields["judge_weight"].shape == (3 * HT + 6,)
    assert plugin_io_names(fields) == (LOGITS_INPUTS[:-1], ("rewritten_logits",))
    kwargs = {"input_ids": "ids", "last_token_ids": "last", "attention_params": SimpleNamespace(
        host_request_types="types", host_context_lengths="lengths")}
    assert stock_spec.plugin_inputs(kwargs, "l", "h", fields["feature_blocks"]) == ["l", "h", "ids", "last", "types",
                                                                                   "lengths"]
    with pytest.raises(ValueError, match="--depth 2 gives no draft node a verdict: .* build with --depth 3 or more"):
        stock_spec.stock_block(path, "lib.so", max_draft_len=2)  # the last two drafts of a chain have none


def test_logits_mode_input_shapes_are_checked(tmp_path):
    fields = stock_spec.stock_plugin_fields(stock_spec.stock_block(judge_file(tmp_path), "l", max_draft_len=4), HT)
    L, V, T, S = 9, 100, 30, 4
    shapes = {"target_logits": (L, V), "target_hidden": (L, HT), "input_ids": (T,), "last_token_ids": (L,),
              "host_request_types": (S,), "host_context_lengths": (S,)}
    check_plugin_input_shapes(shapes, fields)
    check_plugin_input_shapes({k: (-1,) + tuple(v[1:]) for k, v in shapes.items()}, fields)  # dynamic dimensions
    for bad, message in [({"target_hidden": (L, HT + 1)}, "target_hidden width"),
                         ({"last_token_ids": (L + 1,)}, "one entry per logits row"),
                         ({"host_context_lengths": (S + 1,)}, "host_context_lengths must be"),
                         ({"input_ids": (T, 1)}, "rank 1")]:
        with pytest.raises(ValueError, match=message):
            check_plugin_input_shapes({**shapes, **bad}, fields)
    with pytest.raises(ValueError, match="logits-mode inputs must be"):
        check_plugin_input_shapes({k: v for k, v in shapes.items() if k != "host_request_types"}, fields)


def test_plugin_inputs_come_from_the_stock_forward_arguments():
    attention = SimpleNamespace(host_request_types="host_request_types", host_context_lengths="host_context_lengths",
                                context_lengths="context_lengths")
    kwargs = {"input_ids": "input_ids", "last_token_ids": "last_token_ids", "attention_params": attention,
              "position_ids": "position_ids", "kv_cache_params": "kv"}
    got = stock_spec.plugin_inputs(kwargs, "lm_logits[:, :V]", "lm_head_input", [0])
    assert got == ["lm_logits[:, :V]", "lm_head_input", "input_ids", "last_token_ids", "host_request_types",
                   "host_context_lengths"]
    with pytest.raises(ValueError, match=r"lack \['host_request_types', 'host_context_lengths'\]"):
        stock_spec.plugin_inputs({**kwargs, "attention_params": None}, "l", "h", [0])


def test_build_checks_name_the_flag_to_change(tmp_path):
    block = stock_spec.stock_block(judge_file(tmp_path), "l", max_draft_len=4)
    good = dict(use_cache=True, paged_kv_cache=True, remove_input_padding=True, gpt_attention_plugin=True,
                draft_tokens_external=True, gather_context_logits=False, max_draft_len=4, pp_size=1, block=block)
    stock_spec.check_build(**good)
    for change, message in [({"draft_tokens_external": False}, "draft_tokens_external"),
                            ({"gather_context_logits": True}, "gather_context_logits"),
                            ({"paged_kv_cache": False}, "paged KV cache"),
                            ({"remove_input_padding": False}, "remove_input_padding enable"),
                            ({"max_draft_len": 8}, "max_draft_len 4"),
                            ({"pp_size": 2}, "pp_size 1")]:
        with pytest.raises(ValueError, match=message):
            stock_spec.check_build(**{**good, **change})


class FakeNetwork:
    """The three INetworkDefinition calls take_output makes."""

    def __init__(self, names):
        self.outputs = [SimpleNamespace(name=n) for n in names]
        self.unmarked = []

    @property
    def num_outputs(self):
        return len(self.outputs)

    def get_output(self, i):
        return self.outputs[i]

    def unmark_output(self, tensor):
        self.unmarked.append(tensor)
        self.outputs.remove(tensor)


def test_the_base_logits_output_is_taken_over():
    net = FakeNetwork(["logits", "present_key_value_0"])
    tensor = stock_spec.take_output(net, "logits", stock_spec.REPLACED_LOGITS)
    assert tensor.name == stock_spec.REPLACED_LOGITS and net.unmarked == [tensor]
    assert [t.name for t in net.outputs] == ["present_key_value_0"]
    with pytest.raises(ValueError, match="marked no output 'logits'"):
        stock_spec.take_output(net, "logits", "x")


def test_model_class_file_defines_the_class_the_build_names():
    import ast

    tree = ast.parse(stock_model_cls_path().read_text())
    classes = {n.name: n for n in tree.body if isinstance(n, ast.ClassDef)}
    assert "AutoJudgeStockLLaMAForCausalLM" in classes
    methods = {f.name for f in classes["AutoJudgeStockLLaMAForCausalLM"].body if isinstance(f, ast.FunctionDef)}
    assert methods == {"__init__", "prepare_inputs", "forward"}


def test_stock_block_round_trip_through_checkpoint_and_engine_config(tmp_path):
    block = stock_spec.stock_block(judge_file(tmp_path), "lib.so", max_draft_len=5)
    (tmp_path / "config.json").write_text(json.dumps({"architecture": "LlamaForCausalLM", "hidden_size": HT}))
    write_stock_block(tmp_path, block)
    config = json.loads((tmp_path / "config.json").read_text())
    assert stock_spec.StockBlock.from_dict(config[stock_spec.STOCK_BLOCK_KEY]) == block
    assert stock_spec.StockBlock.from_engine_config({"pretrained_config": config}) == block
    assert stock_spec.StockBlock.from_engine_config({"pretrained_config": {}}) is None  # another engine
    with pytest.raises(ValueError, match="unknown keys"):
        stock_spec.StockBlock.from_dict({**block.to_json(), "colour": 1})
    assert convert_args(["--model_dir", "m", "--output_dir", "o", "--stock_block", "b.json"]).stock_block == "b.json"
    with pytest.raises(SystemExit):  # one block per checkpoint
        convert_args(["--model_dir", "m", "--output_dir", "o", "--stock_block", "b", "--autojudge_block", "a"])


# ---------------------------------------------------------------------------------------------
# build-engines --route stock

def test_build_engines_route_stock_dry_run(capsys, tmp_path):
    argv = ["--route", "stock", "--draft_model_dir", "hf/draft", "--target_model_dir", "hf/target",
            "--judge", str(judge_file(tmp_path)), "--plugin_lib", "libautojudge_trt_plugin.so", "--output_dir",
            str(tmp_path / "out"), "--tp_size", "4", "--draft_tp_size", "1", "--depth", "6", "--max_requests", "3",
            "--max_input_len", "100", "--max_new_tokens", "50", "--threshold", "0.25", "--dry-run"]
    assert build_main(argv) == 0
    block, (conv_draft, conv_target, build_draft, build_target) = read_dry_run(capsys.readouterr().out)
    assert block["threshold"] == 0.25 and block["max_draft_len"] == 6
    assert flag(conv_draft, "--tp_size") == "1" and flag(conv_target, "--tp_size") == "4"
    assert "--stock_block" in conv_target and "--stock_block" not in conv_draft
    assert "--model_cls_file" not in build_draft  # a stock draft
    assert Path(flag(build_target, "--model_cls_file")) == stock_model_cls_path()
    assert flag(build_target, "--model_cls_name") == "AutoJudgeStockLLaMAForCausalLM"
    assert flag(build_target, "--speculative_decoding_mode") == "draft_tokens_external"
    assert flag(build_target, "--max_draft_len") == "6"
    for cmd in (build_draft, build_target):
        assert "--kv_cache_type" not in cmd  # the paged cache, trtllm-build's default
        assert flag(cmd, "--use_paged_context_fmha") == "enable"  # block reuse needs it
        assert flag(cmd, "--remove_input_padding") == "enable" and flag(cmd, "--max_batch_size") == "3"
    assert flag(build_target, "--max_input_len") == "156" and flag(build_target, "--max_seq_len") == "157"
    assert flag(build_draft, "--max_seq_len") == "156"


def test_build_engines_route_stock_refuses_what_it_cannot_serve(tmp_path):
    base = ["--route", "stock", "--draft_model_dir", "d", "--target_model_dir", "t", "--plugin_lib", "p",
            "--output_dir", str(tmp_path), "--dry-run"]
    with pytest.raises(ValueError, match="does not run on the stock route: .* runs target-only setups.* the context "
                                         "route \\(build-engines --route context\\) runs every setup"):
        build_main(base + ["--judge", str(judge_file(tmp_path, "DD-DT"))])
    with pytest.raises(SystemExit):  # chain trees need the context route
        build_main(base + ["--judge", str(judge_file(tmp_path)), "--width", "2"])
    with pytest.raises(FileNotFoundError, match="train --setup SETUP.*the stock route runs target-only setups"):
        build_main(base + ["--judge", str(tmp_path / "missing.safetensors")])


# ---------------------------------------------------------------------------------------------
# The executor draft-target loop with the reference engines == the reference speculative loop.

@pytest.mark.parametrize("setup, depth, min_run", [("DT", 4, 1), ("DT-DT1-DT2-LS", 5, 1), ("DT", 5, 3)])
def test_stock_loop_equals_the_reference_judge_loop(pair64, setup, depth, min_run):
    """A target-only judge, DT or looking ahead, with or without a minimum run: per request the packed
    step's draft rows are a chain, the lookahead blocks read the next draft rows, and the rewrite +
    exact-match acceptance equals the Python runtime with JudgeRule on that chain."""
    target, draft = pair64
    head = random_head(setup, target, draft)
    if min_run > 1:
        head = dataclasses.replace(head, meta={**head.meta, "min_run": min_run})
    batch = prompts(4)
    accepted = 0
    for threshold in (0.0, 0.3, 0.6):
        results = stock_generate(ReferenceDrafter(draft), ReferenceStockTarget(target, head, threshold), batch,
                                 depth=depth, max_new_tokens=MAX_NEW, stop_ids=[EOS])
        for prompt, res in zip(batch, results):
            ref = speculative_generate(target, draft, prompt, tree=DraftTree.chain(depth),
                                       rule=JudgeRule(head, threshold), max_new_tokens=MAX_NEW)
            assert res.tokens == ref.tokens and res.stop_reason == ref.stop_reason
            assert [c.accepted for c in res.cycles] == [c.accepted for c in ref.cycles]
            accepted += sum(c.judged for c in ref.cycles)
            if threshold == 0.0:
                assert res.tokens == greedy_generate(target, prompt, MAX_NEW)
    assert accepted > 0  # the judge let mismatches through: the rewrite was exercised


def test_stock_loop_refuses_what_a_draft_target_engine_cannot_return(pair64):
    target, draft = pair64

    class Broken:
        def verify(self, prefixes, drafts):
            return [[99, 98] + d for d in drafts]  # not a prefix of the drafts

    with pytest.raises(RuntimeError, match="accepted prefix of the drafts"):
        stock_generate(ReferenceDrafter(draft), Broken(), [[5, 6]], depth=2, max_new_tokens=4, stop_ids=[EOS])
    with pytest.raises(ValueError, match="depth must be"):
        stock_generate(ReferenceDrafter(draft), Broken(), [[5]], depth=0, max_new_tokens=4, stop_ids=[EOS])
    with pytest.raises(ValueError, match="does not run on the stock route"):
        ReferenceStockTarget(target, random_head("DD-DT", target, draft))


@pytest.mark.skipif(__import__("importlib").util.find_spec("tensorrt_llm") is not None, reason="tensorrt_llm installed")
def test_run_engines_without_tensorrt_llm_says_what_is_missing(capsys):
    from trtllm_autojudge.trt.runner.engines import main

    assert main(["--draft_engine_dir", "d", "--target_engine_dir", "t", "--tokenizer_dir", "k", "--prompt", "x"]) == 2
    assert "tensorrt-llm==1.2" in capsys.readouterr().err
