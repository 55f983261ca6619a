"""Speculative mining: the plain loop's labels for every depth, patterns known by construction,
many-unimportant random pairs in float64, skip-unlikely, bad backends, kill and resume."""
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from positional_lm import PositionalLM
from test_mining import decode, tiny_prompts
from tiny_models import EOS, tiny_pair
from trtllm_autojudge.generation.regen_transformers import TransformersRegenerator
from trtllm_autojudge.generation.regeneration import Continuation, ContextLengthError
from trtllm_autojudge.mining.cached_lm import SessionRegenerator
from trtllm_autojudge.mining.fast import FastLabelMiner
from trtllm_autojudge.mining.miner import LabelMiner, MiningConfig
from trtllm_autojudge.mining.run import make_miner, mine_prompts

HERE = Path(__file__).parent
V, N_PROMPT = 50, 3


def f_target(p):
    return (3 * p + 1) % V


class PatternChecker:
    """Labels known by construction on :class:`PositionalLM`: the answer is the set of swapped
    positions p with ``important(p)``, so the mismatch at p is important exactly when important(p)."""

    name = "pattern"

    def __init__(self, important):
        self.important = important

    def answer(self, text, example=None):
        ids = [int(t) for t in text.split()]
        return tuple(N_PROMPT + j for j, t in enumerate(ids) if t != f_target(N_PROMPT + j) and self.important(N_PROMPT + j))

    def is_final(self, text):
        return False

    def same(self, a, b):
        return a == b


PATTERNS = {"all important": lambda p: True, "all unimportant": lambda p: False,
            "alternating": lambda p: p % 2 == 0}


def positional_miners(swaps, important, depth, batch_size, max_new=24):
    f_draft = lambda p: (f_target(p) + 1) % V if p in swaps else f_target(p)  # noqa: E731
    target, draft = PositionalLM(V, f_target), PositionalLM(V, f_draft)
    config = MiningConfig(max_new_tokens=max_new, early_stop=False, depth=depth)
    checker = PatternChecker(important)
    fast = FastLabelMiner(target, draft, checker, decode, SessionRegenerator(target), config, batch_size)
    return LabelMiner(target, draft, checker, decode, config), fast, f_draft


def mine_all(miner, prompts):
    got = {}
    miner.mine_many(prompts, lambda r: got.update({r["id"]: r}))
    return [got[pid] for pid, _, _ in prompts]


def check_pattern(swaps, important, depth, batch_size):
    sequential, fast, f_draft = positional_miners(swaps, important, depth, batch_size)
    prompts = [(f"q{k}", [7 + k, 8, 9], None) for k in range(3)]
    expected = [[i, int(important(i)), f_target(i), f_draft(i)] for i in sorted(swaps) if N_PROMPT <= i < N_PROMPT + 24]
    for rec in mine_all(sequential, prompts) + mine_all(fast, prompts):
        assert rec["labels"] == expected
        cost = rec["cost"]  # every label keeps exactly one regeneration; the others were dropped
        assert cost["regenerations"] - cost["wasted_regenerations"] == len(expected)
        if all(lab[1] for lab in expected):
            assert cost["wasted_regenerations"] == 0
        if depth == 1:
            assert cost["wasted_regenerations"] == 0


@pytest.mark.parametrize("pattern", sorted(PATTERNS))
@pytest.mark.parametrize("depth", [1, 3, 8])
def test_label_patterns_every_depth(pattern, depth):
    check_pattern(set(range(N_PROMPT, N_PROMPT + 24, 2)) | {N_PROMPT + 5}, PATTERNS[pattern], depth, batch_size=2)


@settings(max_examples=40, deadline=None)
@given(st.sets(st.integers(N_PROMPT, N_PROMPT + 23)), st.sets(st.integers(N_PROMPT, N_PROMPT + 23)),
       st.integers(1, 9), st.integers(1, 4))
def test_random_patterns_equal_the_plain_loop(swaps, important_at, depth, batch_size):
    check_pattern(swaps, lambda p: p in important_at, depth, batch_size)


def test_a_sequential_backend_wastes_nothing():
    # results are awaited in order and the backend serves the oldest request first, so the requests
    # an unimportant label makes useless are cancelled before they start
    _, fast, _ = positional_miners(set(range(N_PROMPT, N_PROMPT + 8)), PATTERNS["all unimportant"], 4, 1, max_new=8)
    (rec,) = mine_all(fast, [("q", [7, 8, 9], None)])
    assert len(rec["labels"]) == 8 and rec["cost"]["regenerations"] == 8 and rec["cost"]["wasted_regenerations"] == 0


class Always:
    """Every mismatch is unimportant (the worst case for speculation)."""

    name = "always"

    def answer(self, text, example=None):
        return None

    def is_final(self, text):
        return False

    def same(self, a, b):
        return True


def test_waste_on_a_batching_backend_when_every_label_is_unimportant():
    target, draft = tiny_pair(seed=3, dtype=torch.float64)
    prompts = tiny_prompts(2, seed=5)
    plain = mine_all(LabelMiner(target, draft, Always(), decode, MiningConfig(16, early_stop=False), stop_ids=[]),
                     prompts)  # no stop token: every response runs the whole budget
    fast = mine_all(FastLabelMiner(target, draft, Always(), decode, TransformersRegenerator(target),
                                   MiningConfig(16, depth=4), 2, stop_ids=[]), prompts)
    assert [r["labels"] for r in fast] == [r["labels"] for r in plain]
    for rec in fast:  # requests after each (unimportant) label were running when it was labelled
        cost = rec["cost"]
        assert cost["regenerations"] - cost["wasted_regenerations"] == len(rec["labels"]) > 3
        assert cost["wasted_regenerations"] > 0 and 0 < cost["wasted_target_tokens"] < cost["target_forwarded_tokens"]


# ---- the tiny random pair, float64: a checker that makes many labels unimportant ----

class Parity:
    """Answer: parity of the tokens divisible by 3 among the first `window` response tokens (about
    half of all swaps keep it)."""

    name = "parity"

    def __init__(self, window):
        self.window = window

    def answer(self, text, example=None):
        return sum(int(t) % 3 == 0 for t in text.split()[: self.window]) % 2

    def is_final(self, text):
        return len(text.split()) >= self.window

    def same(self, a, b):
        return a == b


@pytest.fixture(scope="module")
def pair64():
    return tiny_pair(seed=3, dtype=torch.float64)


@pytest.fixture(scope="module")
def plain_records(pair64):
    target, draft = pair64
    plain = LabelMiner(target, draft, Parity(14), decode, MiningConfig(24, early_stop=False, reuse_cache=False))
    return [plain.mine(p, None, pid) for pid, p, _ in tiny_prompts(8, seed=5)]


@pytest.mark.parametrize("depth,batch_size", [(2, 1), (8, 3), (32, 8)])
def test_fast_miner_equals_plain_on_random_pair_float64(pair64, plain_records, depth, batch_size):
    target, draft = pair64
    fast = FastLabelMiner(target, draft, Parity(14), decode, TransformersRegenerator(target, max_rows=7),
                          MiningConfig(24, depth=depth), batch_size)
    got = mine_all(fast, tiny_prompts(8, seed=5))
    labels = [lab for r in plain_records for lab in r["labels"]]
    assert len(labels) > 30 and 0.2 < sum(1 - lab[1] for lab in labels) / len(labels) < 0.8  # many unimportant
    for a, b in zip(got, plain_records):
        assert a["labels"] == b["labels"] and a["alt_answers"] == b["alt_answers"]
        assert a["dtype"] == "float64"
    assert sum(r["cost"]["target_forwarded_tokens"] for r in got) < sum(r["cost"]["target_forwarded_tokens"] for r in plain_records)


@pytest.mark.parametrize("drafted", [False, True])
def test_lookup_miner_equals_plain_on_random_pair_float64(pair64, plain_records, drafted):
    """`mine --regenerator lookup` / `lookup-draft`: make_miner serves it lazily one request at a
    time; same labels."""
    from trtllm_autojudge.mining.lookup import LookupRegenerator

    target, draft = pair64
    lookup = LookupRegenerator(target, min_window=2, max_window=16, draft=draft if drafted else None)
    miner = make_miner(target, draft, Parity(14), decode, MiningConfig(24, depth=8), 1, lookup)
    assert isinstance(miner, LabelMiner)
    got = mine_all(miner, tiny_prompts(8, seed=5))
    for a, b in zip(got, plain_records):
        assert a["labels"] == b["labels"] and a["alt_answers"] == b["alt_answers"]
    assert lookup.forward_calls < sum(r["cost"]["target_forwarded_tokens"] for r in plain_records)
    # the records count the draft's teacher-forced passes and the regenerator's proposals
    assert sum(r["cost"]["draft_forwarded_tokens"] for r in got) == miner.draft.forwarded + lookup.draft_forwarded
    assert (lookup.draft_forwarded > 0) == drafted
    with pytest.raises(ValueError, match="--batch-size 1"):
        make_miner(target, draft, Parity(14), decode, MiningConfig(24), 2, lookup)


@pytest.mark.parametrize("depth,batch_size", [(1, 3), (3, 8)])
def test_batched_lookup_miner_equals_plain_on_random_pair_float64(pair64, plain_records, depth, batch_size):
    """`mine --regenerator lookup --batch-size B`: the fast miner on the batched backend verifying
    looked-up windows; the plain miner's labels."""
    from trtllm_autojudge.mining.run import local_regenerator

    target, draft = pair64
    regenerator = local_regenerator("lookup", target, draft, batch_size)
    miner = make_miner(target, draft, Parity(14), decode, MiningConfig(24, depth=depth), batch_size, regenerator)
    assert isinstance(miner, FastLabelMiner)
    got = mine_all(miner, tiny_prompts(8, seed=5))
    for a, b in zip(got, plain_records):
        assert a["labels"] == b["labels"] and a["alt_answers"] == b["alt_answers"]
    assert regenerator.forward_calls < sum(r["cost"]["target_forwarded_tokens"] for r in plain_records)


def test_skip_unlikely_labels_low_probability_tokens_important(pair64):
    target, draft = pair64
    prompts = tiny_prompts(6, seed=5)
    p = 0.2
    config = MiningConfig(24, depth=1, skip_unlikely=p)
    seq = mine_all(LabelMiner(target, draft, Parity(14), decode, config), prompts)
    fast = mine_all(FastLabelMiner(target, draft, Parity(14), decode, TransformersRegenerator(target),
                                   MiningConfig(24, depth=6, skip_unlikely=p), 3), prompts)
    assert [r["labels"] for r in seq] == [r["labels"] for r in fast]  # the shortcut is exact across depths too
    skipped = 0
    for rec in seq:
        session = target.session()
        probs = session.forward(rec["final_ids"]).logits.softmax(-1)  # [L, V]
        for (pos, important, _t, d), alt in zip(rec["labels"], rec["alt_answers"]):
            if alt is None:  # skipped: no regeneration, important by the rule
                skipped += 1
                assert important == 1 and probs[pos - 1, d] < p
        assert rec["cost"]["skipped_unlikely"] == sum(a is None for a in rec["alt_answers"])
    assert skipped > 0


# ---- bad backends and bad requests ----

class ShortBackend:
    """Returns at most `most` tokens per request, or appends junk after an EOS to every answer."""

    def __init__(self, inner, most, junk_after_eos=False):
        self.inner, self.most, self.junk, self.max_context = inner, most, junk_after_eos, inner.max_context
        self.submit, self.cancel = inner.submit, inner.cancel

    def collect(self):
        out = self.inner.collect()
        if self.junk:  # tokens after a stop token (or past the budget) must be ignored
            return {t: Continuation(c.tokens + [EOS, 5, 6, 7], c.forwarded) for t, c in out.items()}
        return {t: Continuation(c.tokens[: self.most], c.forwarded) for t, c in out.items()}


@pytest.mark.parametrize("junk", [False, True])
def test_backend_returning_fewer_tokens_or_junk_after_eos(pair64, plain_records, junk):
    target, draft = pair64
    backend = ShortBackend(TransformersRegenerator(target), most=3, junk_after_eos=junk)
    fast = FastLabelMiner(target, draft, Parity(14), decode, backend, MiningConfig(24, depth=4), 2)
    for a, b in zip(mine_all(fast, tiny_prompts(8, seed=5)), plain_records):
        assert a["labels"] == b["labels"] and a["final_ids"][: len(b["final_ids"])] == a["final_ids"]


def test_request_longer_than_the_context_names_the_prompt(pair64, tmp_path):
    target, draft = pair64  # tiny pair: 512 positions
    prompts = [("fits", [5, 6, 7], None), ("too-long", [5] * 500, None)]
    for miner in (LabelMiner(target, draft, Parity(14), decode, MiningConfig(24)),
                  make_miner(target, draft, Parity(14), decode, MiningConfig(24, depth=4), 2)):
        with pytest.raises(ContextLengthError, match="'too-long'.*524 tokens.*context of 512.*--max-new-tokens"):
            mine_prompts(miner, prompts, tmp_path / f"{type(miner).__name__}.jsonl", progress=False)


# ---- a worker killed inside a speculative batch ----

MINE_SCRIPT = HERE / "mpi_mine_tiny.py"


def test_kill_inside_a_speculative_batch_then_resume(tmp_path):
    clean, killed = tmp_path / "clean.jsonl", tmp_path / "killed.jsonl"
    subprocess.run([sys.executable, str(MINE_SCRIPT), str(clean), "fast"], check=True, timeout=300)
    run = subprocess.run([sys.executable, str(MINE_SCRIPT), str(killed), "fast", "12"], timeout=300)
    assert run.returncode == -signal.SIGKILL  # died inside its 12th speculative batch
    before = [json.loads(x)["id"] for x in killed.read_text().splitlines()]
    assert 0 < len(before) < 6
    subprocess.run([sys.executable, str(MINE_SCRIPT), str(killed), "fast"], check=True, timeout=300)
    a = [json.loads(x) for x in clean.read_text().splitlines()]
    b = [json.loads(x) for x in killed.read_text().splitlines()]
    assert sorted(r["id"] for r in b) == sorted(r["id"] for r in a)  # nothing lost, nothing twice
    assert {r["id"]: r["labels"] for r in b} == {r["id"]: r["labels"] for r in a}
    assert [r["id"] for r in b][: len(before)] == before  # what was written stays as it was


def test_local_regenerator_names():
    """`--regenerator` / `--mine-regenerator` names: one factory for every verb."""
    from trtllm_autojudge.mining.run import local_regenerator

    target, draft = tiny_pair(seed=3)
    assert local_regenerator("transformers", target, draft) is None
    assert local_regenerator("lookup", target, draft).drafter is None
    assert local_regenerator("lookup-draft", target, draft).drafter.lm is draft
    batched = local_regenerator("lookup", target, draft, batch_size=4)
    assert isinstance(batched, TransformersRegenerator) and batched.lookup is not None
    assert batched.store.max_bytes > 0  # `mine --no-cache-reuse` turns its prefix KV store off:
    assert local_regenerator("lookup", target, draft, batch_size=4, reuse_cache=False).store.max_bytes == 0
    with pytest.raises(ValueError, match="lookup-draft .*one prompt at a time.*--regenerator lookup to batch"):
        local_regenerator("lookup-draft", target, draft, batch_size=2)
    with pytest.raises(ValueError, match="choose one of transformers, lookup, lookup-draft"):
        local_regenerator("lookahead", target, draft)
