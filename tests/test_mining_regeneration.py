"""The regeneration request interface: the batched transformers backend against the sequential
reference, cutting rules, and the TensorRT-LLM backend's calls against a fake ``tensorrt_llm``
(TensorRT-LLM does not run here: the fake records what our code asks of it and answers from the
reference backend)."""
import random
import sys
import types
from dataclasses import dataclass, field

import pytest
import torch

from tiny_models import EOS, VOCAB, tiny_pair
from trtllm_autojudge.generation.prompt_lookup import LookupWindows, common_prefix_len
from trtllm_autojudge.generation.regen_transformers import TransformersRegenerator
from trtllm_autojudge.generation.regeneration import Continuation, RegenerationRequest, Server, cut, serve
from trtllm_autojudge.mining.cached_lm import SessionRegenerator


def random_rounds(seed, owners="abc", rounds=6):
    """Rounds of requests that branch off sequences computed in earlier rounds, as mining does."""
    rnd = random.Random(seed)
    bases = {o: [rnd.randrange(3, VOCAB) for _ in range(rnd.randrange(1, 30))] for o in owners}
    for _ in range(rounds):
        reqs = []
        for o, base in bases.items():
            for _ in range(rnd.randrange(1, 7)):
                keep = rnd.randrange(0, len(base) + 1)
                prefix = base[:keep] + [rnd.choice([EOS, *range(3, VOCAB)])]
                final = (lambda seq, k=rnd.randrange(3, 30): len(seq) >= k) if rnd.random() < 0.3 else None
                reqs.append(RegenerationRequest(tuple(prefix), keep + 1 + rnd.randrange(0, 40), frozenset({EOS}), final, o))
        results = yield reqs
        for o in bases:
            bases[o] = max((r.sequence for r, q in zip(results, reqs) if q.owner == o), key=len)


def served_like_the_reference(backend, target, seed) -> tuple[int, int, int]:
    """Serves :func:`random_rounds` on ``backend`` and on the sequential reference, asserting equal
    continuations; (requests, tokens the backend forwarded, tokens the reference forwarded)."""
    ref = SessionRegenerator(target, reuse=False)
    rounds, results, n, fwd, fwd_ref = random_rounds(seed), None, 0, 0, 0
    try:
        while True:
            reqs = rounds.send(results)
            results, expected = serve(backend, reqs), serve(ref, reqs)
            assert [r.sequence for r in results] == [r.sequence for r in expected]
            for q, r in zip(reqs, results):
                assert r.sequence[: len(q.prefix)] == list(q.prefix) and len(r.sequence) <= q.max_len
            n += len(reqs)
            fwd += sum(r.forwarded for r in results)
            fwd_ref += sum(r.forwarded for r in expected)
    except StopIteration:
        return n, fwd, fwd_ref


@pytest.mark.parametrize("max_rows", [1, 5, 64])
def test_batched_backend_equals_sequential_float64(max_rows):
    target, _ = tiny_pair(seed=3, dtype=torch.float64)
    n, fwd_fast, fwd_ref = served_like_the_reference(TransformersRegenerator(target, max_rows=max_rows), target, 1)
    assert n > 40 and fwd_fast < fwd_ref / 3  # shared prefixes come from the store


def test_requests_joining_a_running_batch_float64():
    """Continuous batching: requests queued while others decode join the batch; results unchanged."""
    target, _ = tiny_pair(seed=3, dtype=torch.float64)
    ref, fast = SessionRegenerator(target, reuse=False), Server(TransformersRegenerator(target, max_rows=6))
    rounds = random_rounds(3, rounds=2)
    first = next(rounds)
    reqs = first + rounds.send(serve(ref, first))  # the second round branches off the first's results
    expected = serve(ref, reqs)
    got, tickets = {}, []
    for start in range(0, len(reqs), 3):  # three more requests after every collect
        tickets += fast.submit(reqs[start:start + 3])
        got.update(fast.collect())
    while len(got) < len(reqs):
        got.update(fast.collect())
    assert [got[t].sequence for t in tickets] == [r.sequence for r in expected] and len(reqs) > 8


class CheckedRegenerator(TransformersRegenerator):
    """Asserts after every step that each running row's cache holds exactly the entries of the tokens
    before the one it feeds next, and counts the rows that kept fewer tokens than they fed (a window
    cut short: its rejected entries are overwritten by the row's next step)."""

    cut_short = 0

    def _step(self):
        before = {row.ticket: (row.forwarded, len(row.generated)) for row in self.rows}
        done = super()._step()
        for row in self.rows:
            assert row.kv.length == len(row.request.prefix) - 1 + len(row.generated)
            fed, kept = row.forwarded - before[row.ticket][0], len(row.generated) - before[row.ticket][1]
            self.cut_short += kept < fed
        return done


@pytest.mark.parametrize("max_rows,min_window,max_window", [(1, 1, 1), (5, 2, 8), (64, 8, 64), (3, 4, 16)])
def test_batched_lookup_equals_sequential_float64(max_rows, min_window, max_window):
    """The batched backend verifying looked-up windows (rows packed into one sequence,
    each row attending to its own entries, rejected ones overwritten) gives the reference backend's
    greedy continuations in float64."""
    target, _ = tiny_pair(seed=3, dtype=torch.float64)
    lookup = CheckedRegenerator(target, max_rows=max_rows, lookup=LookupWindows(min_window, max_window))
    n, _, _ = served_like_the_reference(lookup, target, 4)
    assert n > 40 and lookup.cut_short > 0


def test_batched_lookup_joining_rows_and_few_forwards_float64():
    """Rows join a running lookup batch; a request repeating a continuation already computed is
    looked up (few batched forwards, not one per token)."""
    target, _ = tiny_pair(seed=3, dtype=torch.float64)
    ref = SessionRegenerator(target, reuse=False)
    rounds = random_rounds(5, rounds=2)
    first = next(rounds)
    reqs = first + rounds.send(serve(ref, first))
    expected = serve(ref, reqs)
    backend = CheckedRegenerator(target, max_rows=4, lookup=LookupWindows(2, 32))
    fast, got, tickets = Server(backend), {}, []
    for start in range(0, len(reqs), 3):
        tickets += fast.submit(reqs[start:start + 3])
        got.update(fast.collect())
    while len(got) < len(reqs):
        got.update(fast.collect())
    assert [got[t].sequence for t in tickets] == [r.sequence for r in expected] and len(reqs) > 8
    # the same requests again, from 5 tokens in: every continuation is in the references
    again = [RegenerationRequest(tuple(r.sequence[:len(q.prefix)]), q.max_len, q.stop_ids, q.is_final, q.owner)
             for q, r in zip(reqs, expected)]
    calls, tokens = backend.forward_calls, sum(len(r.sequence) - len(q.prefix) for q, r in zip(again, expected))
    assert [r.sequence for r in serve(backend, again)] == [r.sequence for r in expected]
    assert backend.forward_calls - calls < tokens / 4


def test_lookup_windows_refuse_bad_sizes():
    with pytest.raises(ValueError, match="min_window <= max_window"):
        LookupWindows(8, 4)
    with pytest.raises(ValueError, match="references"):
        LookupWindows(references=0)


def test_backend_request_and_response_shapes():
    target, _ = tiny_pair(seed=3)
    reqs = [RegenerationRequest((5, 6, 7), 9, frozenset({EOS}), None, "p"),
            RegenerationRequest((5, EOS), 9, frozenset({EOS}), None, "p"),  # ends with a stop token
            RegenerationRequest((5, 6), 2, frozenset({EOS}), None, "p"),  # no budget left
            RegenerationRequest((8, 9, 10, 11), 30, frozenset(), None, "q")]  # cancelled
    for backend in (TransformersRegenerator(target), SessionRegenerator(target)):
        tickets = backend.submit(reqs)
        out = backend.collect()
        assert len(set(tickets)) == 4 and out and tickets[3] not in out
        spent = backend.cancel([tickets[3]])
        assert list(spent) == [tickets[3]] and spent[tickets[3]] >= 0
        while len(out) < 3:
            got = backend.collect()
            assert got, "three requests are still owed"
            out.update(got)
        assert sorted(out) == sorted(tickets[:3]) and backend.collect() == {}
        assert all(type(c) is Continuation for c in out.values())
        first = out[tickets[0]]
        assert 1 <= len(first.tokens) <= 6 and first.forwarded >= len(first.tokens) and all(isinstance(t, int) for t in first.tokens)
        assert out[tickets[1]] == Continuation([], 0) and out[tickets[2]] == Continuation([], 0)


def test_cut_stops_where_the_greedy_loop_stops():
    req = RegenerationRequest((1, 5), 8, frozenset({EOS}), lambda seq: 9 in seq, "p")
    assert cut(req, [3, 4]) == ([1, 5, 3, 4], False)  # short: serve asks for the rest
    assert cut(req, [3, EOS, 4, 5]) == ([1, 5, 3, EOS], True)  # EOS in the middle
    assert cut(req, [3, 9, 4]) == ([1, 5, 3, 9], True)  # answer fixed
    assert cut(req, [3, 4, 5, 6, 7, 8, 10]) == ([1, 5, 3, 4, 5, 6, 7, 8], True)  # budget
    assert cut(RegenerationRequest((1, EOS), 8, frozenset({EOS})), [3]) == ([1, EOS], True)  # nothing to do
    assert common_prefix_len((1, 2, 3, 4), (1, 2, 5)) == 2 and common_prefix_len((), (1,)) == 0


def test_serve_reports_a_backend_that_returns_nothing():
    class Mute:
        max_context = 100

        def submit(self, requests):
            self.owed = list(range(len(requests)))
            return self.owed

        def collect(self):
            return {t: Continuation([], 0) for t in self.owed}

        def cancel(self, tickets):
            return {}

    with pytest.raises(RuntimeError, match="'p7'.*returned no token"):
        serve(Mute(), [RegenerationRequest((1, 5), 8, frozenset({EOS}), None, "p7")])


# ---- TensorRT-LLM LLM API backend, against a fake module ----

@dataclass
class FakeSamplingParams:  # the fields our backend sets, as named in tensorrt_llm/sampling_params.py
    max_tokens: int = 32
    top_k: int | None = None
    end_id: int | None = None
    stop_token_ids: list | None = None
    include_stop_str_in_output: bool = False
    detokenize: bool = True


@dataclass
class FakeCompletion:
    token_ids: list
    finish_reason: str | None
    stop_reason: object = None


@dataclass
class FakeLLM:
    """Records constructor and generate calls; answers greedily from the reference backend, with
    TensorRT-LLM's output conventions (new tokens only; an end_id stop leaves the end token out)."""

    model: str = ""
    kwargs: dict = field(default_factory=dict)
    calls: list = field(default_factory=list)
    reference: object = None

    def generate(self, inputs, sampling_params=None, use_tqdm=True):
        self.calls.append((inputs, sampling_params, use_tqdm))
        outs = []
        for prompt, sp in zip(inputs, sampling_params):
            req = RegenerationRequest(tuple(prompt), len(prompt) + sp.max_tokens, frozenset(sp.stop_token_ids or []))
            tokens = serve(self.reference, [req])[0].sequence[len(prompt):]
            if tokens and tokens[-1] == sp.end_id:
                outs.append(types.SimpleNamespace(outputs=[FakeCompletion(tokens[:-1], "stop")]))
            else:
                outs.append(types.SimpleNamespace(outputs=[FakeCompletion(tokens, "length")]))
        return outs


@pytest.fixture
def fake_trtllm(monkeypatch):
    made = []

    def make_llm(model, **kwargs):
        made.append(FakeLLM(model, kwargs))
        return made[-1]

    llmapi = types.SimpleNamespace(KvCacheConfig=lambda **kw: ("KvCacheConfig", kw))
    module = types.SimpleNamespace(LLM=make_llm, SamplingParams=FakeSamplingParams, llmapi=llmapi)
    monkeypatch.setitem(sys.modules, "tensorrt_llm", module)
    monkeypatch.setitem(sys.modules, "tensorrt_llm.llmapi", llmapi)
    return made


def test_trtllm_backend_calls_the_llm_api_as_read(fake_trtllm):
    from trtllm_autojudge.generation.regen_trtllm import TrtllmRegenerator

    target, _ = tiny_pair(seed=3, dtype=torch.float64)
    backend = TrtllmRegenerator.from_checkpoint("ckpt/target", max_seq_len=512)
    (llm,) = fake_trtllm
    assert llm.model == "ckpt/target"
    assert llm.kwargs == {"skip_tokenizer_init": True, "max_seq_len": 512,
                          "kv_cache_config": ("KvCacheConfig", {"enable_block_reuse": True})}
    llm.reference = SessionRegenerator(target)
    ref = SessionRegenerator(target)
    rounds, results, n = random_rounds(2, owners="ab", rounds=4), None, 0
    try:
        while True:
            reqs = rounds.send(results)
            before = len(llm.calls)
            results = serve(backend, reqs)
            assert [r.sequence for r in results] == [r.sequence for r in serve(ref, reqs)]
            assert len(llm.calls) == before + 1  # one generate call per round: the engine batches in flight
            inputs, params, use_tqdm = llm.calls[-1]
            live = [q for q in reqs if not q.finished]
            assert inputs == [list(q.prefix) for q in live] and use_tqdm is False
            for q, sp in zip(live, params):
                assert (sp.max_tokens, sp.top_k, sp.end_id, sp.stop_token_ids) == (q.budget, 1, EOS, [EOS])
                assert sp.include_stop_str_in_output and not sp.detokenize
            n += len(reqs)
    except StopIteration:
        pass
    assert n > 20


@pytest.mark.parametrize("min_window,max_window,draft_window", [(1, 1, None), (2, 8, None), (8, 64, None),
                                                               (1, 1, 1), (2, 8, 3), (8, 64, 8)])
def test_lookup_backend_equals_sequential_float64(min_window, max_window, draft_window):
    """Lookup regeneration (windows of earlier sequences, or of the draft's greedy tokens, verified
    in one forward) gives the reference backend's greedy continuations exactly in float64, for every
    window setting, with and without the draft."""
    from trtllm_autojudge.mining.lookup import LookupRegenerator

    target, draft = tiny_pair(seed=3, dtype=torch.float64)
    drafted = {} if draft_window is None else {"draft": draft, "draft_window": draft_window}
    lookup = LookupRegenerator(target, min_window, max_window, **drafted)
    n, _, _ = served_like_the_reference(lookup, target, 2)
    assert n > 40
    assert (lookup.draft_forwarded > 0) == (draft_window is not None)


def test_lookup_draft_proposes_what_cannot_be_looked_up():
    """A first response has nothing to look up: without a draft it costs a target forward per
    token; with a draft that agrees with the target (the target itself) it costs one forward per
    drafted window."""
    from trtllm_autojudge.mining.lookup import LookupRegenerator

    target, _ = tiny_pair(seed=3, dtype=torch.float64)
    prompt = (5, 9, 11, 4)
    request = RegenerationRequest(prompt, 4 + 60, frozenset(), None, "p")
    alone, drafted = LookupRegenerator(target), LookupRegenerator(target, draft=target, draft_window=6)
    (a,), (b,) = serve(alone, [request]), serve(drafted, [request])
    assert a.sequence == b.sequence and len(a.sequence) == 64
    assert drafted.forward_calls <= 60 // 7 + 2 < alone.forward_calls
    with pytest.raises(ValueError, match="draft_window"):
        LookupRegenerator(target, draft=target, draft_window=0)


def test_lookup_verifies_a_repeated_continuation_in_few_forwards():
    """A request branching off a sequence the target already continued greedily: the continuation
    after the branch point is looked up, so it costs a few forwards, not one per token."""
    from trtllm_autojudge.generation.prompt_lookup import realign
    from trtllm_autojudge.mining.lookup import LookupRegenerator

    target, _ = tiny_pair(seed=3, dtype=torch.float64)
    lookup = LookupRegenerator(target, min_window=4, max_window=32)
    prompt = (5, 9, 11, 4)
    (first,) = serve(lookup, [RegenerationRequest(prompt, 80, frozenset(), None, "p")])
    calls = lookup.forward_calls
    again = RegenerationRequest(tuple(first.sequence[:20]), 80, frozenset(), None, "p")  # same prefix: all looked up
    (second,) = serve(lookup, [again])
    assert second.sequence == first.sequence and lookup.forward_calls - calls <= 4  # 4 + 8 + 16 + 32 >= 60 tokens
    assert realign([1, 2, 3], [7, 1, 2, 3, 8, 1, 2, 3, 9], expected=8) == 8  # the nearest occurrence
    assert realign([4, 2, 3], [7, 1, 2, 3, 8], expected=0) == 4 and realign([6], [1, 2], 0) is None
