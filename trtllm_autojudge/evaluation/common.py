"""Arguments shared by eval, bench, demo and generate: the draft tree, the judge, the questions."""
from __future__ import annotations

import argparse
import shlex
from dataclasses import replace
from pathlib import Path

from ..data.problem import Problem
from ..data.question_set import describe, file_record, set_record
from ..decoding.dynamic_tree import DynamicTree
from ..decoding.tree import DraftTree
from ..judge.frontier import choose_threshold
from ..judge.head import JudgeHead
from ..judge.veto import VETO_CLASSES, veto_record
from ..mining.cli import problem_id
from ..models.dtype import dtype_name
from ..models.loading import EMBEDDED_TARGETS
from ..models.vocab_subset import tokenizer_fingerprint
from ..tasks import Task
from ..tasks.base import ASSETS
from .certificate import Certificate, pair_fingerprint, rule_fields
from .runner import ACCEPT_IMPLS, Question

DYNAMIC_PREFIX = "dynamic:"
DEFAULT_K = 8  # --k of a draft model's chain when not given
AUTO_HARM_CAPS = (0.01, 0.02, 0.05, 0.1, 0.2)  # validation important-accept rates swept by --thresholds auto


def add_decoding_args(parser: argparse.ArgumentParser) -> None:
    g = parser.add_argument_group("decoding")
    g.add_argument("--k", type=int, default=None,
                   help=f"chain draft: K draft tokens per cycle (default {DEFAULT_K}; with an EAGLE head, the depth it "
                        "was trained to draft)")
    g.add_argument("--tree", default=None,
                   help="a tree instead of a chain: static, as branching per depth (e.g. 3,2,1; a chain of 3 is "
                        "1,1,1), or EAGLE-2 dynamic as dynamic:DEPTH,TOP_K,NODES (an EAGLE drafter only, e.g. "
                        "dynamic:6,8,30)")
    g.add_argument("--judge", default=None,
                   help="judge file (default: the task's shipped judge when the embedded pair is used)")
    g.add_argument("--max-new-tokens", type=int, default=256)
    g.add_argument("--accept-impl", choices=ACCEPT_IMPLS, default="python",
                   help="who decides each cycle's acceptance for the judge: 'python' (the reference rule, default) or "
                        "'core' (the compiled host core the engines run: torch.ops.autojudge.accept, built on first use)")
    g.add_argument("--veto", default=None, metavar="CLASSES",
                   help=f"token classes the judge never accepts a mismatch on, comma-separated ({', '.join(VETO_CLASSES)}; "
                        "judge/veto.py): added to the judge file's own veto")
    g.add_argument("--min-run", type=int, default=None, metavar="M",
                   help="ask the judge only about mismatches that open at least M tokens through the exact matches "
                        "below them (decoding/modes.py JudgeRule): replaces the judge file's own minimum run; "
                        "1 for none")
    g.add_argument("--min-target-prob", type=float, default=None, metavar="P",
                   help="ask the judge only about mismatches where the target gave its own token at least "
                        "probability P (decoding/modes.py JudgeRule; the Python rule only): replaces the judge "
                        "file's own gate; 0 for none")


def add_budget_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--answer-budget", type=float, default=None, metavar="B",
                        help="run the judge at the threshold its certificate proves within this share of answers "
                             "changed (e.g. 0.01), read from the judge file's certified ladder (calibrate "
                             "--answer-budgets); refused when the file certifies no such budget, or certifies "
                             "another K, dtype, token budget, pair or rule than this run's")


def budget_judge(judge: JudgeHead, budget: float, target, draft, task: Task, k: int | None, tree: str | None,
                 max_new_tokens: int) -> JudgeHead:
    """``judge`` with its default threshold set to the one its certificate proves within ``budget``
    (``--answer-budget``), for this run's settings; SystemExit saying what it does certify otherwise.
    Never a silent fall back to an uncertified threshold."""
    if not 0.0 < budget < 1.0:
        raise SystemExit(f"--answer-budget is a share of the questions whose answer may change: give a number in "
                         f"(0, 1), e.g. 0.01, got {budget:g}")
    certificate, mismatches = judge_certificate(judge, target, draft, task, k, tree, max_new_tokens)
    if certificate is None:
        raise SystemExit("--answer-budget: this judge file has no certificate, so no threshold is certified within any "
                         "budget; certify one with `trtllm-autojudge calibrate`, or give --threshold(s)")
    if mismatches:
        raise SystemExit(f"--answer-budget: the judge's certificate holds for {certificate.where()}, not for this run ("
                         + "; ".join(mismatches) + "): run with its settings, or calibrate the judge for yours")
    try:
        threshold = certificate.threshold_for(budget)
    except ValueError as e:
        raise SystemExit(f"--answer-budget: {e}") from None
    return replace(judge, threshold=threshold)


def add_batch_arg(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--batch", type=int, default=1, metavar="B",
                        help="questions decoded at once, their forwards packed into one (models/packed_sessions.py): "
                             "batch-1 decoding on a CPU is memory-bound, so 8 decode several times as many questions "
                             "an hour; the runs then report no tokens/s (default 1)")


def check_batch(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    if args.batch < 1:
        parser.error(f"--batch is a number of questions decoded at once: give 1 or more, got {args.batch}")


def settle_k(args: argparse.Namespace, drafter) -> None:
    """Fill in ``--k`` when it was not given: an EAGLE head's trained drafting depth, else DEFAULT_K."""
    if args.k is None:
        args.k = getattr(drafter, "trained_depth", None) or DEFAULT_K


def draft_tree(args: argparse.Namespace) -> DraftTree | DynamicTree:
    """``--tree`` (static or ``dynamic:D,K,N``), else the chain of ``--k``."""
    if args.tree:
        dynamic = args.tree.startswith(DYNAMIC_PREFIX)
        try:
            numbers = [int(w) for w in args.tree.removeprefix(DYNAMIC_PREFIX).split(",")]
            if dynamic and len(numbers) != 3:
                raise ValueError("a dynamic tree is dynamic:DEPTH,TOP_K,NODES")
            return DynamicTree(*numbers) if dynamic else DraftTree.static(numbers)
        except ValueError as e:
            raise SystemExit(f"--tree {args.tree!r}: {e}") from None
    return DraftTree.chain(args.k)


def judge_path(args: argparse.Namespace, required: bool, task: Task) -> Path | None:
    """``--judge``, else the task's shipped judge for the embedded pair (with ``--draft eagle``: the
    one calibrated on the shipped EAGLE head's drafts); None when there is none and none is ``required``."""
    if args.judge is not None:
        return Path(args.judge)
    if args.target in EMBEDDED_TARGETS and args.draft == "eagle":
        shipped = task.shipped_eagle_judge_path()
        if shipped is not None and shipped.is_file():
            return shipped
        if required:
            raise SystemExit(f"task {task.name} ships no judge for its EAGLE head's drafts: pass --judge PATH (bench: "
                             f"--eagle-judge PATH), a target-only judge; `trtllm-autojudge calibrate --draft eagle` "
                             f"certifies one for them")
        return None
    shipped = task.shipped_judge_path(None if getattr(args, "tree", None) else getattr(args, "k", None))
    if args.target in EMBEDDED_TARGETS and args.draft == "embedded":
        if shipped is not None and shipped.is_file():
            return shipped
        if required:
            missing = f"{shipped.name} is missing" if shipped is not None else "the task ships none"
            raise SystemExit(f"no judge is shipped for the embedded pair on task {task.name} ({missing}): make one "
                             f"with `python build_scripts/make_judge.py --task {task.name}`, or pass --judge PATH")
    if required:
        raise SystemExit("this command needs a judge file for your models: --judge PATH (trtllm-autojudge train)")
    return None


def load_judge(args: argparse.Namespace, target, draft, required: bool, task: Task) -> JudgeHead | None:
    """The judge of :func:`judge_path`, checked against the pair; None when there is none and none is ``required``."""
    path = judge_path(args, required, task)
    return None if path is None else load_judge_file(path, target, draft)


def judge_record(path, judge: JudgeHead) -> dict:
    """What a result file records of the judge it ran with: the file (a shipped one by its place in the
    package, so results name no folder of the machine they ran on; any other as given), and what
    identifies it."""
    try:
        file = f"{ASSETS.parent.name}/{Path(path).resolve().relative_to(ASSETS.parent).as_posix()}"
    except ValueError:  # not in the package
        file = str(path)
    return {"file": file, **judge.describe()}


def load_judge_file(path, target, draft) -> JudgeHead:
    """The judge at ``path``, checked against the pair (hidden sizes, model names, dtype). A drafter
    without hidden states of its own (``hidden_size`` None: an EAGLE head) takes target-only judges,
    whatever draft they were trained with."""
    if not Path(path).is_file():
        raise SystemExit(f"judge file {path} not found")
    own_hidden = draft.hidden_size is not None
    try:
        dtype = getattr(target, "dtype", None)
        judge = JudgeHead.load(path, draft_hidden=draft.hidden_size, target_hidden=target.hidden_size,
                               draft_model=draft.name if own_hidden else None, target_model=target.name,
                               dtype=None if dtype is None else dtype_name(dtype))
    except ValueError as e:
        raise SystemExit(str(e)) from None
    if judge.needs_draft_hidden and not own_hidden:
        raise SystemExit(f"judge {path} (setup {judge.setup}) reads the draft's hidden states, and the {draft.name} has "
                         f"none: give a target-only judge (DT, DT1, DT2, LS blocks), e.g. the task's stock-route judge")
    return judge


def judge_thresholds(text: str, judge: JudgeHead | None, harm_caps: tuple[float, ...] = AUTO_HARM_CAPS) -> list[float]:
    """Thresholds to sweep: comma-separated numbers, or 'auto'.

    'auto' reads the judge file's validation frontier: for each cap, the largest threshold whose
    validation important-accept rate is at most that cap (distinct values, ascending). A judge's
    probabilities sit near the share of important labels, which differs per pair and task, so
    fixed numbers rarely span its frontier. A judge file without a frontier gives its own threshold.
    """
    if judge is None or not text.strip():
        return []
    if text.strip() != "auto":
        try:
            return [float(t) for t in text.split(",") if t.strip()]
        except ValueError:
            raise SystemExit(f"--thresholds {text!r}: give comma-separated numbers or 'auto'") from None
    frontier = judge.meta.get("metrics", {}).get("frontier")
    if not frontier:
        return [judge.threshold]
    return sorted({choose_threshold(frontier, cap)["threshold"] for cap in harm_caps})


def questions_from(problems: list[Problem], tokenizer, task: Task) -> list[Question]:
    """Evaluation questions: the task's prompt, the problem's gold answer, the problem as the checker's example."""
    return [Question(problem_id(p.question), task.prompt_ids(tokenizer, p.question), p.gold, p.to_json())
            for p in problems]


def question_set(args: argparse.Namespace, question_ids: list[str]) -> dict:
    """The questions the arguments of :func:`~trtllm_autojudge.data.sources.add_problem_args` chose, as a
    question-set record (:mod:`~trtllm_autojudge.data.question_set`: how to regenerate them, their
    count and digest; never a folder of this machine). ``question_ids``: [Q], in the order they ran."""
    if args.questions:
        record = file_record(args.questions, question_ids)
    else:
        draw = ["--split", args.split, "--originals" if args.originals else "--no-originals",
                "--variants-per-template", str(args.variants_per_template), "--seed", str(args.seed)]
        record = set_record(question_ids, shlex.join(draw), args.seed)
    return record if args.limit is None else {**record, "limit": args.limit}


def judge_certificate(judge: JudgeHead | None, target, draft, task: Task, k: int | None, tree: str | None,
                      max_new_tokens: int) -> tuple[Certificate | None, list[str]]:
    """The judge file's certificate (None: it has none) and how a run with these settings differs
    from what it certifies (empty: it applies to the run's judge point at the certified threshold)."""
    certificate = None if judge is None else Certificate.from_meta(judge.meta.get("certificate"))
    if certificate is None:
        return None, []
    return certificate, certificate.mismatches(
        task=task.name, dtype=dtype_name(target.dtype), k=k, tree=tree, max_new_tokens=max_new_tokens,
        pair=pair_fingerprint(target, draft), threshold=certificate.threshold, max_judged=certificate.max_judged,
        **rule_fields(judge.meta))


def certificate_lines(certificate: Certificate | None, mismatches: list[str]) -> str:
    """What a user reads of the judge's certificate before its numbers."""
    if certificate is None:
        return ("certificate: none. This judge's default threshold comes from validation labels; no bound on the "
                "answers it changes was measured (`trtllm-autojudge calibrate` certifies one).")
    point = f"judge@{certificate.threshold:g}" + ("" if certificate.max_judged is None else f",{certificate.max_judged}")
    verdict = (f"it applies to this run's {point} row" if not mismatches
               else "it does NOT apply to this run: " + "; ".join(mismatches))
    return f"certificate: {certificate.summary()}\n  {verdict}"


def refuse_calibration_questions(certificate: Certificate | None, qids: list[str], verb: str) -> None:
    """Refuse to report on questions the judge was calibrated on (by question text)."""
    overlap = 0 if certificate is None else certificate.overlap(qids)
    if overlap:
        raise SystemExit(f"{verb}: {overlap} of the {len(qids)} questions are calibration questions of the judge's "
                         f"certificate ({describe(certificate.question_set)}): report on questions disjoint from "
                         f"them (python build_scripts/heldout_questions.py --exclude-draw SEED:PER_TEMPLATE ...)")


def apply_rule_options(judge: JudgeHead | None, args: argparse.Namespace, tokenizer) -> JudgeHead | None:
    """``judge`` with the options of :func:`add_decoding_args` that change its verdicts: ``--veto``,
    ``--min-run`` and ``--min-target-prob``."""
    if judge is None:
        return judge
    if args.min_run is not None:
        if args.min_run < 1:
            raise SystemExit(f"--min-run is a number of tokens a judged acceptance must open: give 1 (any) or more, "
                             f"got {args.min_run}")
        meta = {k: v for k, v in judge.meta.items() if k != "min_run"}
        judge = replace(judge, meta=meta if args.min_run == 1 else {**meta, "min_run": args.min_run})
    gate = args.min_target_prob
    if gate is not None:
        if not 0 <= gate < 1:
            raise SystemExit(f"--min-target-prob is the target's least probability of its own token at a judged "
                             f"mismatch: give a number in [0, 1) (0: no gate), got {gate}")
        meta = {k: v for k, v in judge.meta.items() if k != "min_target_prob"}
        judge = replace(judge, meta=meta if gate == 0 else {**meta, "min_target_prob": gate})
    return _apply_veto(judge, args.veto, tokenizer)


def _apply_veto(judge: JudgeHead, text: str | None, tokenizer) -> JudgeHead:
    """``judge`` with the token classes of ``--veto`` (comma-separated) added to its own veto."""
    if not text:
        return judge
    classes = sorted({c.strip() for c in text.split(",") if c.strip()} | set(judge.meta.get("veto", {}).get("classes", ())))
    try:
        veto = veto_record(tokenizer, classes, tokenizer_fingerprint(tokenizer))
    except ValueError as e:
        raise SystemExit(f"--veto {text!r}: {e}") from None
    return replace(judge, meta={**judge.meta, "veto": veto})
