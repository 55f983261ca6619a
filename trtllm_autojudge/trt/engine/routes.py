"""Which judge setups each engine route runs (docs/deploy.md, the route table), and the refusal of
the others, which ``build-engines`` and the routes' runtimes give before anything is built or run.

Every route computes the judge with the AutoJudgeAccept plugin, so a judge must be exportable to it
(:func:`trtllm_autojudge.judge.export.unsupported_reason`: blocks of
:data:`trtllm_autojudge.spec.judge_blocks.BLOCK_CODES`, no token veto, no target-confidence gate),
and its default operating point must not limit the judged acceptances of a response
(``max_judged``, ``calibrate --max-judged``): the plugin decides each cycle on its own. A minimum run (``min_run``, ``calibrate
--min-run``) every route applies: the plugin's ``min_run`` field, from the judge file. Beyond that a
route runs a setup when it can feed every input the setup's blocks read:

- the context route feeds the draft's hidden states (``autojudge_draft_hidden``, blocks DD and DD1,
  from the draft engine built with ``draft_model_cls.py``) and the tree's greedy children
  (``autojudge_greedy_child``, the lookahead blocks DT1, DT2, DD1 and LS): every setup;
- the stock route runs in TensorRT-LLM's own draft-target flow, which gives the target engine no
  draft hidden states; its draft rows are a chain, so the lookahead blocks read the sequence's next
  draft rows: target-only setups;
- the context route's Triton repository drafts with the stock ``tensorrt_llm`` model, which returns
  no hidden states: target-only setups;
- the EAGLE route drafts inside the target engine with EAGLE heads over the target's own hidden
  states: no draft model, so target-only setups; a lookahead block reads a node's greedy child, which
  the engine knows only for a static tree (``eagle_choices``, a build-time constant), not for an
  EAGLE-2 dynamic tree.
"""
from __future__ import annotations

from ...judge.export import unsupported_reason
from ...judge.head import JudgeHead

EVERY_SETUP = "every setup of the blocks DT, DD, DT1, DT2, DD1, LS (e.g. DD-DT or DD-DT-DT1-DT2-DD1-LS)"
TARGET_ONLY = "target-only setups, of the blocks DT, DT1, DT2, LS in any order (e.g. DT or DT-DT1-DT2-LS)"
# route -> (how docs/deploy.md names it, why it feeds no draft hidden states (None: it feeds them),
# where every setup runs instead)
ROUTE_JUDGES = {
    "context": ("the context route", None, None),
    "stock": ("the stock route", "no stock TensorRT-LLM runtime passes the draft's hidden states to the target engine",
              "the context route (build-engines --route context)"),
    "triton-context": ("the context route's Triton repository", "its draft model, the stock tensorrt_llm, returns no "
                       "hidden states", "the context route's runner (run-engines)"),
    "eagle": ("the EAGLE route", "the EAGLE engine drafts with EAGLE heads over the target's own hidden states: there "
              "is no draft model", "the context route (build-engines --route context)"),
}


def route_setups(route: str) -> str:
    """The setups a route runs, in words."""
    return TARGET_ONLY if ROUTE_JUDGES[route][1] else EVERY_SETUP


def check_route_judge(route: str, head: JudgeHead, depth: int | None = None, dynamic_tree: bool = False) -> None:
    """Refuse a judge ``route`` cannot run, and with ``depth`` (the chain's draft tokens, a tree's
    depth) a judge that would decide no node (a lookahead judge, or a minimum run, too deep for it);
    on the EAGLE route with ``dynamic_tree``, a lookahead judge. Raises ValueError naming the route
    and the setups it runs."""
    name, no_draft_hidden, instead = ROUTE_JUDGES[route]
    reason = unsupported_reason(head, "plugin")
    if reason is None and head.needs_draft_hidden and no_draft_hidden:
        reason = f"its blocks DD / DD1 read the draft's hidden states, and {no_draft_hidden}"
    if reason:
        raise ValueError(f"judge setup {head.setup} does not run on {name}: {reason}. {name[0].upper() + name[1:]} runs "
                         f"{route_setups(route)}" + (f"; {instead} runs {EVERY_SETUP}" if instead else ""))
    if dynamic_tree and head.lookahead:
        raise ValueError(f"judge setup {head.setup} looks ahead (its lookahead blocks read a node's greedy child), which "
                         f"{name} knows only for a static tree (eagle_choices fix it at build time), not for an EAGLE-2 "
                         f"dynamic tree: build with --eagle_choices, or use a judge without lookahead blocks (DT)")
    if depth is not None and depth < head.min_run:
        raise ValueError(f"--depth {depth} gives no draft node a verdict: the judge's minimum run is {head.min_run} "
                         f"(a mismatch is judged only where it and the exact matches below it make {head.min_run} "
                         f"tokens), and a chain of {depth} draft tokens has no such node; build with --depth "
                         f"{head.min_run} or more (the judge file's certificate names the K it holds at)")
    if depth is not None and head.lookahead and depth <= head.lookahead:
        raise ValueError(f"--depth {depth} gives no draft node a verdict: judge setup {head.setup} needs "
                         f"{head.lookahead} draft tokens after a node, so the last {head.lookahead} nodes of a chain "
                         f"have none; build with --depth {head.lookahead + 1} or more")
