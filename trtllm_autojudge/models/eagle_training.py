"""Training an EAGLE-1/2 head (:mod:`.eagle_head`) on a frozen target, EAGLE's recipe; resumable.

Teacher: the target's final-norm hidden states ``h_0 .. h_{L-1}`` over a training sequence
``x_0 .. x_{L-1}`` (teacher-forced; the states the drafter reads at run time). Pair i is
``(h_i, x_{i+1})`` at position i; the head's feature ``f_i`` (causal over the sequence's pairs) learns
the target's next state and, through the frozen LM head, its next-token distribution::

    loss = SmoothL1(f_i, h_{i+1}) + cls_weight * CE(softmax(lm_head(h_{i+1})), lm_head(f_i))

with uniform noise ``U(-noise, noise)`` on the input states (past depth 1 the head reads its own,
inexact features), the embedding and the LM head the target's (frozen), over the pairs from the
response on (``i >= start - 1``: the pairs a drafter feeds after the prompt). A batch's sequences are
packed into one forward: block-diagonal causal mask, positions per sequence.

Alpha per depth (:func:`chain_lengths`, :func:`alpha_counts`): on sequences that continue as the
target decodes greedily, a chain drafted from every response position p: depth 1 from pair p's
feature, depth d from the pair (the feature of depth d - 1, the token of depth d - 1) at position
``p + d - 1``, as :class:`trtllm_autojudge.decoding.eagle_drafter.EagleDrafter` drafts. ``alpha[d]``
is the share of chains right at depth d among those right up to d - 1.

Resuming: the checkpoint holds the step, the head, the optimizer and the noise generator; batches are
taken in a fixed order (``step % len(batches)``), so a stopped run goes on as if it had not stopped.
"""
from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch
import torch.nn.functional as F

from ..data.batches import Example, pad_batch
from .eagle_head import EagleHead, LayerCache
from .finetune import load_checkpoint, lr_at, save_checkpoint

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EagleTraining:
    """The recipe's settings (EAGLE's defaults where it has them: cls_weight 0.1, noise 0.1)."""

    steps: int  # total optimizer steps
    lr: float = 3e-4
    warmup: int = 10
    noise: float = 0.1  # uniform noise amplitude on the input states
    cls_weight: float = 0.1
    unroll: int = 1  # drafting depths the loss reads (1: EAGLE's recipe; see pair_loss)
    depth: int = 4  # alpha is reported for depths 1..depth
    eval_every: int = 50
    save_every: int = 10
    seed: int = 0


@dataclass
class PackedPairs:
    """A batch's pairs packed into one sequence of T pairs."""

    tokens: torch.Tensor  # [T] long: x_{i+1}
    hidden: torch.Tensor  # [T, H]: h_i
    target: torch.Tensor  # [T, H]: h_{i+1}
    positions: torch.Tensor  # [T] long: i
    mask: torch.Tensor  # [T, T] bool: pair a sees pair b (same sequence, b <= a)
    learn: torch.Tensor  # [T] bool: pairs from the response on


@torch.no_grad()
def teacher_states(target_model, batch: Sequence[Example], pad_id: int) -> tuple[torch.Tensor, ...]:
    """``ids [b, w]``, ``mask [b, w]``, ``learn [b, w]`` (:func:`pad_batch`) and the target's final-norm
    states ``[b, w, H]`` of a batch."""
    ids, mask, learn = pad_batch(batch, pad_id)
    hidden = target_model.model(input_ids=ids, attention_mask=mask).last_hidden_state  # [b, w, H]
    return ids, mask, learn, hidden


def pack_pairs(ids: torch.Tensor, mask: torch.Tensor, learn: torch.Tensor, hidden: torch.Tensor) -> PackedPairs:
    """The pairs of every sequence of a padded batch (``ids``, ``mask``, ``learn`` [b, w], ``hidden`` [b, w, H])."""
    parts = {k: [] for k in ("tokens", "hidden", "target", "positions", "learn", "segment")}
    for row, L in enumerate(mask.sum(1).tolist()):
        parts["tokens"].append(ids[row, 1:L])
        parts["hidden"].append(hidden[row, : L - 1])
        parts["target"].append(hidden[row, 1:L])
        parts["positions"].append(torch.arange(L - 1))
        parts["learn"].append(learn[row, : L - 1])
        parts["segment"].append(torch.full((L - 1,), row))
    cat = {k: torch.cat(v) for k, v in parts.items()}
    seg, pos = cat.pop("segment"), cat["positions"]
    same = (seg[:, None] == seg[None, :]) & (pos[:, None] >= pos[None, :])  # [T, T]
    return PackedPairs(mask=same, **cat)


def unrolled_features(head: EagleHead, pairs: PackedPairs, hidden: torch.Tensor, unroll: int) -> list[torch.Tensor]:
    """The head's features at drafting depths 1..``unroll`` over packed pairs (``hidden [T, H]``: the
    input states, noised or not), teacher-forced on the tokens: ``out[k-1][a]`` [H] is the feature
    of the depth-k pair at position ``i = positions[a]`` of a chain drafted from ``p = i - k + 1``,
    the pair (the depth-(k-1) feature at i - 1, x_{i+1}) that sees the context pairs 0..p and the
    chain's pairs of depths 2..k (at positions p+1..i), as :func:`chain_lengths` and the drafter
    draft. Depth 1 is the pairs themselves; a row whose chain would start before the sequence is
    computed from zeros (``positions < k - 1``: no loss may read it)."""
    caches = [LayerCache() for _ in head.layers]
    T = pairs.tokens.shape[0]
    out = [head(pairs.tokens, hidden, pairs.positions, caches, pairs.mask)]  # [T, H]
    same = pairs.mask | pairs.mask.T  # [T, T]: same sequence
    pos = pairs.positions
    for k in range(2, unroll + 1):
        prev = torch.cat([torch.zeros_like(out[-1][:1]), out[-1][:-1]])  # [T, H]: the feature at index a - 1
        prev = torch.where((pos >= 1)[:, None], prev, torch.zeros_like(prev))  # at position 0, a - 1 is another sequence's
        blocks = [same & (pos[None, :] <= pos[:, None] - (k - 1))]  # context pairs 0..p
        blocks += [same & (pos[None, :] == pos[:, None] - (k - j)) for j in range(2, k + 1)]  # depths 2..k
        blocks[-1] = blocks[-1] | torch.eye(T, dtype=torch.bool)  # every row sees itself (no empty row)
        out.append(head(pairs.tokens, prev, pos, caches, torch.cat(blocks, dim=1)))
    return out


def pair_loss(head: EagleHead, lm_head, pairs: PackedPairs, noise: float, cls_weight: float,
              generator: torch.Generator, unroll: int = 1) -> tuple[torch.Tensor, float, float]:
    """(loss, regression part, classification part) of the packed pairs, averaged over drafting
    depths 1..``unroll`` (:func:`unrolled_features`; 1: EAGLE's recipe, deeper: the head also
    learns from its own features, as it drafts past depth 1)."""
    h = pairs.hidden.float()  # [T, H]
    h = h + (torch.rand(h.shape, generator=generator) * 2 - 1) * noise
    features = unrolled_features(head, pairs, h, unroll)
    regs, clss = [], []
    for k, f in enumerate(features, start=1):
        learn = pairs.learn & (pairs.positions >= k - 1)  # [T]
        f, target = f[learn].float(), pairs.target[learn].float()  # [n, H]
        regs.append(F.smooth_l1_loss(f, target))
        with torch.no_grad():
            p = lm_head(target).float().softmax(-1)  # [n, V]
        clss.append(-(p * lm_head(f).float().log_softmax(-1)).sum(-1).mean())
    reg, cls = torch.stack(regs).mean(), torch.stack(clss).mean()
    return reg + cls_weight * cls, float(reg.detach()), float(cls.detach())


@torch.inference_mode()
def chain_lengths(head: EagleHead, lm_head, ids: Sequence[int], start: int, hidden: torch.Tensor,
                  depth: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Chains drafted from every response position of one sequence (``ids`` [L]: the prompt and the
    target's greedy continuation, ``hidden`` [L, H] its states): ``positions`` [n] (p, from
    ``start - 1``) and ``right`` [n] (the chain's drafts equal to the sequence's tokens in a row, up
    to ``depth`` and to the sequence's end: a cycle of a lossless loop after position p accepts that many)."""
    L = len(ids)
    tokens = torch.tensor(list(ids), dtype=torch.long)
    caches = [LayerCache() for _ in head.layers]
    context = head(tokens[1:], hidden[:-1], torch.arange(L - 1), caches)  # [L-1, H]: pair p's feature
    ps = torch.arange(max(start - 1, 0), max(L - 2, 0))  # [n]: chains whose depth-1 token x_{p+2} exists
    n = len(ps)
    right = torch.zeros(n, dtype=torch.long)
    if n == 0:
        return ps, right
    feature, alive = context[ps], torch.ones(n, dtype=torch.bool)
    for d in range(1, depth + 1):
        if d > 1:  # the pair (feature of depth d-1, token of depth d-1) at position p + d - 1
            keys = caches[0].keys.shape[1]
            mask = torch.zeros(n, keys + n, dtype=torch.bool)
            mask[:, : L - 1] = torch.arange(L - 1)[None] <= ps[:, None]  # context pairs 0..p
            for k in range(d - 1):  # this chain's pairs of earlier depths, and its new one
                mask[torch.arange(n), L - 1 + k * n + torch.arange(n)] = True
            feature = head(tokens[(ps + d).clamp(max=L - 1)], feature, ps + d - 1, caches, mask)  # [n, H]
        hit = lm_head(feature).argmax(-1) == tokens[(ps + d + 1).clamp(max=L - 1)]
        alive = alive & hit & (ps + d + 1 <= L - 1)
        right += alive.long()
    return ps, right


def alpha_counts(positions: torch.Tensor, right: torch.Tensor, length: int, depth: int) -> np.ndarray:
    """[depth, 2] (right, tried) per depth of :func:`chain_lengths`' chains over a sequence of
    ``length`` tokens: tried at depth d, the chains right up to d - 1 whose depth-d token exists."""
    counts = np.zeros((depth, 2), np.int64)
    for d in range(1, depth + 1):
        exists = positions + d + 1 <= length - 1
        counts[d - 1] = int((exists & (right >= d)).sum()), int((exists & (right >= d - 1)).sum())
    return counts


def alpha_report(counts: np.ndarray) -> list[float | None]:
    """alpha per depth from summed counts (None where no chain got that far)."""
    return [round(int(r) / int(t), 4) if t else None for r, t in counts]


def heldout_alpha(head: EagleHead, target_model, heldout: Sequence[Example], depth: int) -> list[float | None]:
    counts = np.zeros((depth, 2), np.int64)
    for ids, start in heldout:
        with torch.no_grad():
            hidden = target_model.model(input_ids=torch.tensor([ids])).last_hidden_state[0]  # [L, H]
        positions, right = chain_lengths(head, target_model.lm_head, ids, start, hidden, depth)
        counts += alpha_counts(positions, right, len(ids), depth)
    return alpha_report(counts)


def train_head(head: EagleHead, target_model, batches: Sequence[Sequence[Example]], heldout: Sequence[Example],
               pad_id: int, settings: EagleTraining, checkpoint: Path, dtype: torch.dtype = torch.float32,
               stop_after: int | None = None) -> dict:
    """Train ``head`` (float32 weights; forwards under autocast to ``dtype``) on ``batches`` for
    ``settings.steps`` steps, resuming from ``checkpoint`` when it exists; with ``stop_after``, stop
    (saving) after that many steps of this call. Returns the state: ``step``, ``history`` (loss per
    step), ``alphas`` (``{"step", "alpha"}`` per evaluation), ``done``."""
    for p in (*target_model.parameters(), head.embed_tokens.weight):
        p.requires_grad_(False)
    params = [p for p in head.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(params, lr=settings.lr, weight_decay=0.0)
    generator = torch.Generator().manual_seed(settings.seed)
    autocast = dict(device_type="cpu", dtype=dtype, enabled=dtype != torch.float32)
    saved = load_checkpoint(checkpoint)
    if saved is not None:
        head.load_state_dict(saved["head"])
        optimizer.load_state_dict(saved["optimizer"])
        generator.set_state(saved["generator"])
        state = {k: saved[k] for k in ("step", "history", "alphas")}
        log.info("resuming from %s at step %d", checkpoint, state["step"])
    else:
        with torch.autocast(**autocast):
            state = {"step": 0, "history": [], "alphas": [{"step": 0, "alpha": heldout_alpha(
                head, target_model, heldout, settings.depth)}]}
    head.train()
    ran = 0
    while state["step"] < settings.steps and (stop_after is None or ran < stop_after):
        for group in optimizer.param_groups:
            group["lr"] = lr_at(state["step"], settings.steps, settings.warmup, settings.lr)
        with torch.autocast(**autocast):
            pairs = pack_pairs(*teacher_states(target_model, batches[state["step"] % len(batches)], pad_id))
            loss, reg, cls = pair_loss(head, target_model.lm_head, pairs, settings.noise, settings.cls_weight,
                                       generator, settings.unroll)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        state["step"] += 1
        ran += 1
        state["history"].append({"loss": round(float(loss.detach()), 5), "reg": round(reg, 5), "cls": round(cls, 5)})
        if state["step"] % settings.eval_every == 0 or state["step"] == settings.steps:
            with torch.autocast(**autocast):
                alpha = heldout_alpha(head, target_model, heldout, settings.depth)
            state["alphas"].append({"step": state["step"], "alpha": alpha})
            log.info("step %d: loss %.4f, held-out alpha per depth %s", state["step"], state["history"][-1]["loss"], alpha)
        if state["step"] % settings.save_every == 0 or state["step"] == settings.steps or ran == stop_after:
            save_checkpoint(checkpoint, {**state, "head": head.state_dict(), "optimizer": optimizer.state_dict(),
                                         "generator": generator.get_state()})
    head.eval()
    return {**state, "done": state["step"] >= settings.steps}
