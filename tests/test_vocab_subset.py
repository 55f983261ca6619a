"""The vocabulary-subset draft head on the tiny pair: head == masked reference, lossless == greedy,
no token outside the subset drafted, the subset file round-trips and a mismatching one is refused."""
from collections import Counter

import numpy as np
import pytest
import torch

from tiny_models import VOCAB, tiny_pair
from trtllm_autojudge.decoding.speculative import greedy_generate, propose, speculative_generate
from trtllm_autojudge.decoding.tree import DraftTree
from trtllm_autojudge.models.vocab_subset import (
    SubsetHead, VocabSubset, load_subset, most_frequent, reference_subset_logits, tokenizer_fingerprint,
)

MAX_NEW = 40
TREES = [DraftTree.chain(1), DraftTree.chain(4), DraftTree.chain(16), DraftTree.static([2, 2, 1]),
         DraftTree.static([3, 1, 1, 1])]


class WordTokenizer:
    """The part of a tokenizer a subset file checks: its token -> id map."""

    def __init__(self, words):
        self.vocab = {w: i for i, w in enumerate(words)}

    def get_vocab(self):
        return dict(self.vocab)


TOKENIZER = WordTokenizer([f"w{i}" for i in range(VOCAB)])


def subset_of(ids, vocab=VOCAB):
    return most_frequent([Counter({int(t): 1 for t in ids})], len(ids), vocab, tokenizer_fingerprint(TOKENIZER))


def prompts(n, seed=1):
    g = torch.Generator().manual_seed(seed)
    return [torch.randint(3, VOCAB, (int(torch.randint(1, 12, (1,), generator=g)),), generator=g).tolist()
            for _ in range(n)]


def with_subset(draft, ids):
    draft.use_head(SubsetHead(draft.model.lm_head, subset_of(ids)))
    return draft


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
def test_subset_head_equals_the_masked_full_head(dtype):
    _, draft = tiny_pair(seed=0, dtype=dtype)
    rng = np.random.default_rng(0)
    for size in (16, 37, VOCAB):
        ids = np.sort(rng.choice(VOCAB, size, replace=False))
        head = SubsetHead(draft.model.lm_head, subset_of(ids))
        hidden = torch.randn(5, draft.hidden_size).to(dtype)  # [T, H]
        with torch.no_grad():
            fast, ref = head(hidden), reference_subset_logits(draft.model.lm_head, hidden, ids)
        assert fast.dtype == torch.float32 and fast.shape == (5, VOCAB)
        assert torch.equal(torch.isinf(fast), torch.isinf(ref))
        torch.testing.assert_close(fast[:, ids], ref[:, ids], atol=1e-5, rtol=1e-5)


def test_session_hidden_state_is_unchanged_by_the_head():
    target, draft = tiny_pair(seed=0)
    _, subset_draft = tiny_pair(seed=0)
    with_subset(subset_draft, range(3, 60))
    prompt = prompts(1, seed=4)[0]
    full, sub = draft.session().forward(prompt), subset_draft.session().forward(prompt)
    assert torch.equal(full.hidden, sub.hidden)
    with torch.no_grad():
        ref = reference_subset_logits(draft.model.lm_head, full.hidden, range(3, 60))
    torch.testing.assert_close(sub.logits, ref)


@pytest.mark.parametrize("tree", TREES, ids=lambda t: f"N{t.num_nodes}-D{t.max_depth}")
def test_lossless_with_a_subset_draft_equals_target_greedy(tree):
    """A half-vocabulary subset (EOS left out) still gives the target's greedy tokens exactly, and
    the draft still agrees with the target sometimes."""
    target, draft = tiny_pair(seed=0)
    ids = np.sort(np.random.default_rng(2).choice(np.arange(3, VOCAB), VOCAB // 2, replace=False))
    with_subset(draft, ids)
    accepted = 0
    for prompt in prompts(6):
        out = speculative_generate(target, draft, prompt, tree=tree, max_new_tokens=MAX_NEW)
        assert out.tokens == greedy_generate(target, prompt, MAX_NEW)
        accepted += sum(c.accepted for c in out.cycles)
    assert accepted > 0


@pytest.mark.parametrize("tree", [DraftTree.chain(6), DraftTree.static([3, 2, 2])], ids=["chain", "tree"])
def test_no_token_outside_the_subset_is_drafted(tree):
    target, draft = tiny_pair(seed=0)
    _, full_draft = tiny_pair(seed=0)
    ids = set(range(40, 40 + 20))  # tokens the full draft rarely prefers
    with_subset(draft, sorted(ids))
    outside = 0
    for prompt in prompts(8, seed=9):
        seq = prompt + greedy_generate(target, prompt, 10, stop_ids=[])
        drafted = propose(draft.session(), seq, tree).node_tokens
        full = propose(full_draft.session(), seq, tree).node_tokens
        assert set(drafted.tolist()) <= ids
        outside += sum(int(t) not in ids for t in full)
    assert outside > 0  # the full head would have drafted outside tokens here


def test_subset_file_round_trips(tmp_path):
    counts = Counter({5: 9, 7: 9, 11: 3, 2: 1})
    subset = most_frequent([counts, Counter({30: 4})], 20, VOCAB, tokenizer_fingerprint(TOKENIZER), always=[2],
                           meta={"task": "tiny"})
    low = [0, 1, 3, 4, 6, 8, 9, 10, 12, 13, 14, 15, 16, 17, 18]  # then the lowest ids not chosen yet
    assert subset.token_ids.tolist() == sorted([2, 5, 7, 11, 30] + low)
    assert subset.meta["coverage"] == 1.0 and subset.meta["counted_tokens"] == 22
    path = tmp_path / "vocab.safetensors"
    subset.save(path)
    back = load_subset(path, TOKENIZER, VOCAB)
    assert np.array_equal(back.token_ids, subset.token_ids) and np.array_equal(back.counts, subset.counts)
    assert back.meta["task"] == "tiny" and back.fingerprint == subset.fingerprint


def test_a_mismatching_subset_file_is_refused(tmp_path):
    path = tmp_path / "vocab.safetensors"
    subset_of(range(16, 48)).save(path)
    renamed = WordTokenizer([f"w{i}" for i in range(VOCAB - 1)] + ["other"])
    with pytest.raises(ValueError, match="fingerprint .* this tokenizer's is"):
        load_subset(path, renamed, VOCAB)
    with pytest.raises(ValueError, match=f"made for {VOCAB} model outputs, the draft has 128"):
        load_subset(path, TOKENIZER, 128)
    with pytest.raises(FileNotFoundError):
        load_subset(tmp_path / "missing.safetensors", TOKENIZER, VOCAB)
    (tmp_path / "junk.safetensors").write_bytes(b"not a file")
    with pytest.raises(ValueError, match="not a readable"):
        load_subset(tmp_path / "junk.safetensors", TOKENIZER, VOCAB)


def test_bad_subsets_are_refused():
    fp = tokenizer_fingerprint(TOKENIZER)
    with pytest.raises(ValueError, match="at least 16"):
        VocabSubset(np.arange(8), np.zeros(8), VOCAB, fp)
    with pytest.raises(ValueError, match="increasing, unique"):
        VocabSubset(np.array([3] + list(range(20))), np.zeros(21), VOCAB, fp)
    with pytest.raises(ValueError, match="increasing, unique"):
        VocabSubset(np.arange(80, 80 + 20), np.zeros(20), VOCAB, fp)
    with pytest.raises(ValueError, match="subset size"):
        most_frequent([Counter()], VOCAB + 1, VOCAB, fp)
