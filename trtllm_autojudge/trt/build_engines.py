"""Build the TensorRT-LLM 1.2 engines of an AutoJudge route (``trtllm-autojudge build-engines``).

Three routes (docs/deploy.md says when to use which); the context and stock routes are four commands
each (``--dry-run`` prints them and exits): convert the draft, convert the target with the route's
config block, build the draft, build the target; the EAGLE route is two.

The judge is ``--judge``, else the task's (``--task``): its shipped judge (``Task.shipped_judge``), and
on the EAGLE route its judge for its shipped EAGLE head's drafts (``Task.shipped_eagle_judge``) where
it ships one. A judge setup the route cannot feed (the stock and EAGLE routes run target-only setups)
is refused before anything is built, naming the setups the route runs
(trtllm_autojudge/trt/engine/routes.py).

``--route context`` (default): the target is context-only (``--kv_cache_type disabled``) with the
AutoJudgeAccept plugin in accept mode after the LM head (``--model_cls_file
trtllm_autojudge/trt/engine/target_model_cls.py``); it takes chain trees (``--depth D --width W``,
see trtllm_autojudge/trt/runner/packing.py) and per-request thresholds, and runs every judge setup
of the blocks DT, DD, DT1, DT2, DD1, LS (a lookahead judge adds the input
``autojudge_greedy_child``). For a judge whose blocks read the draft (DD, DD1) the draft is
converted with ``--draft_hidden_output`` and built with ``--model_cls_file
trtllm_autojudge/trt/engine/draft_model_cls.py`` (its last-token final-norm hidden states become
an engine output) and room for a context that ends at a draft node. With
``--width`` > 1 the draft is built with ``--gather_generation_logits`` (the leaf siblings come from
its generation logits, which Triton's backend returns only from such an engine).

``--route eagle``: one engine, TensorRT-LLM's EAGLE engine (``--speculative_decoding_mode eagle``, paged
KV cache) of the target and an EAGLE-1/2 head (``--eagle_head``, :mod:`trtllm_autojudge.models.eagle_head`),
built with ``--model_cls_file trtllm_autojudge/trt/engine/eagle_model_cls.py``: the plugin in tree logits
mode rewrites ``lm_logits`` before the stock accept step. Static trees (``--eagle_choices``) or EAGLE-2
dynamic trees (``--dynamic_tree --depth D --top_k K --max_draft_len N``); per-request thresholds
(``posterior_threshold``, or ``--threshold_source engine`` for one per engine); target-only judges, a
lookahead one on static trees only; ``--tp_size N``. A tree deeper than ``--num_eagle_layers`` or larger
than ``--max_draft_len``, a head for another target, and ``eagle_choices`` that are not prefix-closed are
refused before anything is built. Two commands: convert, build.

``--route stock``: the target is a stock ``--speculative_decoding_mode draft_tokens_external``
engine (paged KV cache, block reuse through paged context FMHA, ``--max_draft_len D``) built with
``--model_cls_file trtllm_autojudge/trt/engine/stock_model_cls.py``: the plugin in logits mode
between the LM head and ``logits``, one threshold per engine (``--threshold``, default the judge
file's), target-only judges (blocks DT, DT1, DT2, LS, e.g. DT-DT1-DT2-LS). The draft is a stock
paged-KV engine. Both run unchanged in the executor's and Triton's draft-target flows, with
``--tp_size N``.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from ..decoding.dynamic_tree import DynamicTree
from ..decoding.tree import DraftTree
from ..judge.head import JudgeHead
from ..tasks import add_task_args, task_from_args
from ..tasks.base import Task
from . import draft_model_cls_path, eagle_model_cls_path, model_cls_path, stock_model_cls_path
from .engine.eagle_spec import THRESHOLD_SOURCES, EagleBlock, eagle_block
from .engine.io_spec import EngineBlock, engine_block
from .engine.routes import check_route_judge, route_setups
from .engine.stock_spec import StockBlock, stock_block
from .runner.packing import chain_tree

MODEL_CLS_NAME = "AutoJudgeLLaMAForCausalLM"
DRAFT_MODEL_CLS_NAME = "AutoJudgeDraftLLaMAForCausalLM"
STOCK_MODEL_CLS_NAME = "AutoJudgeStockLLaMAForCausalLM"
EAGLE_MODEL_CLS_NAME = "AutoJudgeEagleForCausalLM"
PLUGINS = ["--gpt_attention_plugin", "auto", "--gemm_plugin", "auto", "--remove_input_padding", "enable"]
STREAMABLE = ("target", "draft")  # --weight_streaming's choices; the draft's is refused with the reason


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="trtllm-autojudge build-engines", description=__doc__.split("\n\n")[0])
    ap.add_argument("--route", choices=sorted(ROUTES), default="context",
                    help="context: cache-free target returning the accepted tokens (trees, per-request thresholds); "
                         "stock: KV-cached draft_tokens_external target whose logits the judge rewrites (executor, "
                         "Triton BLS, TP unchanged); eagle: TensorRT-LLM's EAGLE engine, tree logits rewritten before "
                         "its stock accept step (recommended for tree drafts); docs/deploy.md")
    ap.add_argument("--draft_model_dir", help="Hugging Face draft checkpoint (Llama family; context and stock routes)")
    ap.add_argument("--target_model_dir", required=True, help="Hugging Face target checkpoint (Llama family)")
    ap.add_argument("--judge", help="judge file (trtllm-autojudge train); the context route runs every setup of "
                    "the blocks DT, DD, DT1, DT2, DD1, LS, the stock route the target-only ones (e.g. DT-DT1-DT2-LS). "
                    "Default: the task's shipped judge (context, stock) or the task's EAGLE-head judge (eagle)")
    ap.add_argument("--plugin_lib", required=True, help="libautojudge_trt_plugin.so (trtllm-autojudge build-plugin)")
    ap.add_argument("--output_dir", required=True, help="writes ckpt/{draft,target} and engines/{draft,target}")
    ap.add_argument("--tp_size", type=int, default=1, help="tensor-parallel ranks of the target engine")
    ap.add_argument("--draft_tp_size", type=int, help="tensor-parallel ranks of the draft engine (default: --tp_size; "
                    "the mpirun runner needs both equal, the Triton repository serves a --draft_tp_size 1 draft)")
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16"])
    ap.add_argument("--max_requests", type=int, default=8, help="sequences verified per cycle")
    ap.add_argument("--depth", type=int, default=8, help="D: draft tokens along the greedy chain (stock: --max_draft_len)")
    ap.add_argument("--width", type=int, default=1, help="W: draft candidates per depth (1 = plain chain; context route)")
    ap.add_argument("--threshold", type=float, help="stock route: the engine's judge threshold; eagle route: the default "
                    "for requests without one (default: the judge file's)")
    eagle = ap.add_argument_group("eagle route")
    eagle.add_argument("--eagle_head", help="EAGLE head directory (build_scripts/train_eagle.py, EagleHead.save)")
    eagle.add_argument("--eagle_choices", help="a static tree: JSON list of rank lists, or a file holding one, e.g. "
                       "'[[0], [1], [0, 0]]' (prefix-closed)")
    eagle.add_argument("--dynamic_tree", action="store_true", help="EAGLE-2 dynamic trees: --depth levels, --top_k "
                       "tokens per expanded node, --max_draft_len nodes kept")
    eagle.add_argument("--top_k", type=int, help="EAGLE-2: K (dynamic_tree_max_topK)")
    eagle.add_argument("--max_draft_len", type=int, help="draft-token budget per request (default: the static tree's "
                       "nodes; required with --dynamic_tree)")
    eagle.add_argument("--num_eagle_layers", type=int, help="EagleNets: the deepest level (default: the tree's depth)")
    eagle.add_argument("--max_non_leaves_per_layer", type=int, help="nodes with children per level (default: the tree's "
                       "widest, or --top_k)")
    eagle.add_argument("--threshold_source", choices=THRESHOLD_SOURCES, default="request",
                       help="request: each request's EagleConfig(posterior_threshold) (run-engines); engine: --threshold "
                            "for every request (Triton's backend sets no per-request EagleConfig)")
    ap.add_argument("--weight_streaming", nargs="?", const="target", default=None, choices=STREAMABLE,
                    help="build the target engine for TensorRT's weight streaming (trtllm-build --weight_streaming, "
                         "with --gemm_plugin disable: only non-plugin weights stream), so `run-engines "
                         "--gpu_weights_percent P` keeps a share P of its weights on the GPU and streams the rest "
                         "from the host each forward: the offloaded regime where long draft windows pay "
                         "(docs/deploy.md, 'Weight streaming')")
    ap.add_argument("--max_input_len", type=int, default=1024, help="longest prompt in tokens")
    ap.add_argument("--max_new_tokens", type=int, default=512, help="longest generation in tokens")
    ap.add_argument("--python", default=sys.executable, help="interpreter that runs the conversion")
    ap.add_argument("--trtllm_build", default="trtllm-build", help="the trtllm-build executable")
    ap.add_argument("--dry-run", "--dry_run", dest="dry_run", action="store_true",
                    help="print the commands and the autojudge block, run nothing")
    add_task_args(ap)
    args = ap.parse_args(argv)
    args.draft_tp_size = args.tp_size if args.draft_tp_size is None else args.draft_tp_size
    for name in ("tp_size", "draft_tp_size", "max_requests", "depth", "width", "max_input_len", "max_new_tokens"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1")
    if args.route == "stock" and args.width != 1:
        ap.error("--width: the stock route verifies chains (draft_tokens_external has no tree input); use --route context")
    if args.route == "context" and args.threshold is not None:
        ap.error("--threshold: the context route takes a threshold per request at run time (run-engines --threshold)")
    if args.route == "eagle":
        if args.eagle_head is None or bool(args.eagle_choices) == bool(args.dynamic_tree):
            ap.error("--route eagle needs --eagle_head and one tree: --eagle_choices (static) or --dynamic_tree (EAGLE-2)")
        if args.dynamic_tree and (args.top_k is None or args.max_draft_len is None):
            ap.error("--dynamic_tree needs --top_k K and --max_draft_len N (and --depth D levels)")
        if args.width != 1 or args.draft_model_dir:
            ap.error("--route eagle drafts inside the target with the EAGLE head: no --draft_model_dir or --width")
    else:
        if args.draft_model_dir is None:
            ap.error(f"--route {args.route} needs --draft_model_dir")
        eagle_args = [f"--{n}" for n in ("eagle_head", "eagle_choices", "top_k", "max_draft_len", "num_eagle_layers",
                                         "max_non_leaves_per_layer") if getattr(args, n) is not None]
        if eagle_args or args.dynamic_tree:
            ap.error(f"{eagle_args or ['--dynamic_tree']} belong to --route eagle")
    if args.weight_streaming == "draft":
        ap.error("--weight_streaming draft: the draft runs K steps per cycle, so streaming its weights would cost K "
                 "transfers a cycle where the target's cost one; stream the target (--weight_streaming)")
    if args.judge is None:
        chain = args.depth if args.route != "eagle" and args.width == 1 else None
        args.judge = str(task_judge(task_from_args(args), args.route, chain))
    return args


def stream_target_weights(build: list[str]) -> list[str]:
    """The target's ``trtllm-build`` command built for weight streaming: ``--weight_streaming`` on, and
    the GEMM plugin off, since only weights outside plugins stream (docs/deploy.md, 'Weight
    streaming'). The AutoJudgeAccept plugin's fields (the judge's few weights) stay on the GPU."""
    if "--gemm_plugin" not in build:
        raise ValueError("stream_target_weights takes a trtllm-build command with --gemm_plugin")
    out = list(build)
    out[out.index("--gemm_plugin") + 1] = "disable"
    return out + ["--weight_streaming"]


def task_judge(task: Task, route: str, depth: int | None = None) -> Path:
    """The judge a route takes from ``task`` when ``--judge`` is not given: on the EAGLE route its judge for
    its shipped EAGLE head's drafts where it ships one, else its shipped judge (the one certified for a
    chain of ``depth`` draft tokens where the task ships one); FileNotFoundError saying how to make it,
    or to pass ``--judge``, when the task ships none or the file is missing."""
    eagle_judge = task.shipped_eagle_judge_path() if route == "eagle" else None
    path = eagle_judge or task.shipped_judge_path(depth)
    if path is None:
        raise FileNotFoundError(f"task {task.name} ships no judge: pass --judge PATH (a judge file of "
                                f"{route_setups(route)}, from `trtllm-autojudge train`)")
    if not path.is_file():
        if eagle_judge is not None:
            make = (f"`trtllm-autojudge calibrate --task {task.name} --draft eagle --out {path} ...` over a DT judge "
                    f"trained on labels mined along the head's drafts (docs/notebook/eagle-head.md)")
        else:
            make = (f"`python build_scripts/make_judge.py --task {task.name} ...` (it installs it there; the stock "
                    f"and EAGLE routes take target-only setups: --setups DT-DT1-DT2-LS)")
        raise FileNotFoundError(f"the {route} route's judge of task {task.name}, {path}, does not exist: make it with "
                                f"{make}, or pass --judge PATH")
    return path


def target_block(args: argparse.Namespace) -> EngineBlock:
    tree = chain_tree(args.depth, args.width)
    return engine_block(args.judge, args.plugin_lib, max_requests=args.max_requests, max_draft_nodes=tree.num_nodes,
                        max_paths=len(tree.paths), max_path_len=tree.max_depth + 1)


def judge_file(args: argparse.Namespace) -> str:
    """``--judge`` (or the task's judge), which must exist: its setup decides how the engines are built."""
    if not Path(args.judge).is_file():
        raise FileNotFoundError(f"judge file {args.judge} does not exist: its feature setup decides how the engines "
                                f"are built (train one with `trtllm-autojudge train --setup SETUP`; the {args.route} "
                                f"route runs {route_setups(args.route)})")
    return args.judge


def context_commands(args: argparse.Namespace, block: EngineBlock, block_file: Path) -> list[list[str]]:
    """The context route's four commands, in order (see the module docstring); a judge whose blocks
    read the draft (DD, DD1) gets the draft engine that returns its hidden states."""
    head = JudgeHead.load(judge_file(args))
    check_route_judge("context", head, depth=args.depth)
    draft_hidden = head.needs_draft_hidden
    out = Path(args.output_dir).resolve()
    ckpt, engines = out / "ckpt", out / "engines"
    longest = args.max_input_len + args.max_new_tokens + args.depth  # prefix + one path of draft tokens
    convert = [args.python, "-m", "trtllm_autojudge.trt.engine.convert", "--dtype", args.dtype]
    plugins = PLUGINS
    draft_convert = convert + ["--tp_size", str(args.draft_tp_size), "--model_dir",
                               str(Path(args.draft_model_dir).resolve()), "--output_dir", str(ckpt / "draft")]
    draft_build = [args.trtllm_build, "--checkpoint_dir", str(ckpt / "draft"), "--output_dir", str(engines / "draft"),
                   *plugins, "--max_batch_size", str(args.max_requests)]
    if draft_hidden:
        # The hidden state of a node the chain generation did not feed comes from a context that ends at
        # that node (prefix + one path), generating one token.
        draft_convert.append("--draft_hidden_output")
        draft_build[1:1] = ["--model_cls_file", str(draft_model_cls_path()), "--model_cls_name", DRAFT_MODEL_CLS_NAME]
        draft_build += ["--max_input_len", str(longest), "--max_seq_len", str(longest + 1)]
    else:
        draft_build += ["--max_input_len", str(args.max_input_len + args.max_new_tokens), "--max_seq_len", str(longest)]
    if args.width > 1:
        # The leaf siblings come from the draft's generation logits. The Triton backend never sets
        # ExecutorConfig.gather_generation_logits, so only an engine built with the flag returns them.
        draft_build.append("--gather_generation_logits")
    return [
        draft_convert,
        convert + ["--tp_size", str(args.tp_size), "--model_dir", str(Path(args.target_model_dir).resolve()),
                   "--output_dir", str(ckpt / "target"), "--autojudge_block", str(block_file)],
        draft_build,
        [args.trtllm_build, "--checkpoint_dir", str(ckpt / "target"), "--output_dir", str(engines / "target"),
         "--model_cls_file", str(model_cls_path()), "--model_cls_name", MODEL_CLS_NAME, *plugins,
         "--kv_cache_type", "disabled", "--multiple_profiles", "disable",
         "--max_batch_size", str(block.max_rows), "--max_input_len", str(longest), "--max_seq_len", str(longest),
         "--max_num_tokens", str(block.max_rows * longest)],
    ]


def stock_target_block(args: argparse.Namespace) -> StockBlock:
    return stock_block(judge_file(args), args.plugin_lib, max_draft_len=args.depth, threshold=args.threshold)


def stock_commands(args: argparse.Namespace, block: StockBlock, block_file: Path) -> list[list[str]]:
    """The stock route's four commands, in order (see the module docstring)."""
    out = Path(args.output_dir).resolve()
    ckpt, engines = out / "ckpt", out / "engines"
    prefix = args.max_input_len + args.max_new_tokens  # the longest context a request can reach
    convert = [args.python, "-m", "trtllm_autojudge.trt.engine.convert", "--dtype", args.dtype]
    # Block reuse (which the draft-target target requires) needs paged context FMHA.
    paged = ["--use_paged_context_fmha", "enable", "--max_batch_size", str(args.max_requests)]
    return [
        convert + ["--tp_size", str(args.draft_tp_size), "--model_dir", str(Path(args.draft_model_dir).resolve()),
                   "--output_dir", str(ckpt / "draft")],
        convert + ["--tp_size", str(args.tp_size), "--model_dir", str(Path(args.target_model_dir).resolve()),
                   "--output_dir", str(ckpt / "target"), "--stock_block", str(block_file)],
        [args.trtllm_build, "--checkpoint_dir", str(ckpt / "draft"), "--output_dir", str(engines / "draft"), *PLUGINS,
         *paged, "--max_input_len", str(prefix), "--max_seq_len", str(prefix + args.depth)],
        [args.trtllm_build, "--checkpoint_dir", str(ckpt / "target"), "--output_dir", str(engines / "target"),
         "--model_cls_file", str(stock_model_cls_path()), "--model_cls_name", STOCK_MODEL_CLS_NAME, *PLUGINS, *paged,
         "--speculative_decoding_mode", "draft_tokens_external", "--max_draft_len", str(block.max_draft_len),
         # a verification is one context of prefix + D draft tokens; it yields at most D + 1 tokens
         "--max_input_len", str(prefix + args.depth), "--max_seq_len", str(prefix + args.depth + 1)],
    ]


def eagle_tree(args: argparse.Namespace) -> DraftTree | DynamicTree:
    """The tree of --eagle_choices (a JSON list or a file holding one), or the EAGLE-2 rule."""
    if args.dynamic_tree:
        return DynamicTree(args.depth, args.top_k, args.max_draft_len)
    text = Path(args.eagle_choices).read_text() if Path(args.eagle_choices).is_file() else args.eagle_choices
    try:
        choices = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"--eagle_choices is neither a JSON list of rank lists nor a file holding one: {e}") from e
    return DraftTree.from_choices(choices)


def eagle_target_block(args: argparse.Namespace) -> EagleBlock:
    return eagle_block(judge_file(args), args.plugin_lib, eagle_tree(args), max_draft_len=args.max_draft_len,
                       num_eagle_layers=args.num_eagle_layers, max_non_leaves_per_layer=args.max_non_leaves_per_layer,
                       threshold=args.threshold, threshold_source=args.threshold_source)


def eagle_commands(args: argparse.Namespace, block: EagleBlock, block_file: Path) -> list[list[str]]:
    """The EAGLE route's two commands: convert target + head, build the EAGLE engine (module docstring)."""
    out = Path(args.output_dir).resolve()
    ckpt, engines = out / "ckpt" / "target", out / "engines" / "target"
    prefix = args.max_input_len + args.max_new_tokens  # the longest sequence; a step adds a tree of draft tokens
    return [
        [args.python, "-m", "trtllm_autojudge.trt.engine.eagle_convert", "--dtype", args.dtype, "--tp_size",
         str(args.tp_size), "--model_dir", str(Path(args.target_model_dir).resolve()), "--eagle_head",
         str(Path(args.eagle_head).resolve()), "--output_dir", str(ckpt), "--eagle_block", str(block_file)],
        [args.trtllm_build, "--checkpoint_dir", str(ckpt), "--output_dir", str(engines), "--model_cls_file",
         str(eagle_model_cls_path()), "--model_cls_name", EAGLE_MODEL_CLS_NAME, *PLUGINS,
         "--use_paged_context_fmha", "enable", "--speculative_decoding_mode", "eagle",
         "--max_batch_size", str(args.max_requests), "--max_input_len", str(args.max_input_len),
         "--max_seq_len", str(prefix + block.max_draft_len + 1)],
    ]


def check_eagle_inputs(args: argparse.Namespace, block: EagleBlock) -> None:
    """Refuse a judge or a head that does not fit the target before the conversion starts."""
    from .engine.eagle_convert import check_head_fits_target
    from .engine.eagle_spec import eagle_plugin_fields

    eagle_plugin_fields(block, target_hidden=model_hidden_sizes(args)["target"])
    check_head_fits_target(args.eagle_head, args.target_model_dir)


def model_hidden_sizes(args: argparse.Namespace) -> dict[str, int]:
    sizes = {}
    for role, d in (("draft", args.draft_model_dir), ("target", args.target_model_dir)):
        if d is None:
            continue
        cfg = Path(d) / "config.json"
        if not cfg.is_file():
            raise FileNotFoundError(f"{cfg} does not exist: --{role}_model_dir must be a Hugging Face checkpoint")
        sizes[role] = int(json.loads(cfg.read_text())["hidden_size"])
    return sizes


def check_context_inputs(args: argparse.Namespace, block: EngineBlock) -> None:
    """Refuse a judge that does not fit the models before any long conversion starts."""
    from .plugin.fields import engine_plugin_fields

    sizes = model_hidden_sizes(args)
    engine_plugin_fields(block.judge_file, block.max_path_len, "accept", target_hidden=sizes["target"],
                         draft_hidden=sizes["draft"])


def check_stock_inputs(args: argparse.Namespace, block: StockBlock) -> None:
    from .engine.stock_spec import stock_plugin_fields

    stock_plugin_fields(block, target_hidden=model_hidden_sizes(args)["target"])


@dataclass(frozen=True)
class Route:
    """What differs between the routes: the config block, the commands, the pre-build check."""

    make_block: Callable[[argparse.Namespace], EngineBlock | StockBlock | EagleBlock]
    commands: Callable[[argparse.Namespace, object, Path], list[list[str]]]
    check: Callable[[argparse.Namespace, object], None]


ROUTES = {"context": Route(target_block, context_commands, check_context_inputs),
          "stock": Route(stock_target_block, stock_commands, check_stock_inputs),
          "eagle": Route(eagle_target_block, eagle_commands, check_eagle_inputs)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    route = ROUTES[args.route]
    block = route.make_block(args)
    block_file = Path(args.output_dir).resolve() / "autojudge_block.json"
    if not args.dry_run and importlib.util.find_spec("tensorrt_llm") is None:
        print("tensorrt_llm is not importable: building engines needs a GPU host with `pip install "
              "tensorrt-llm==1.2.*` (docs/deploy.md). `--dry-run` prints the commands without it.", file=sys.stderr)
        return 2
    commands = route.commands(args, block, block_file)
    if args.weight_streaming:  # every route builds its target (the EAGLE route: target and head) last
        commands[-1] = stream_target_weights(commands[-1])
    if args.dry_run:
        print(f"# {block_file}\n{json.dumps(block.to_json(), indent=2)}")
        for cmd in commands:
            print(shlex.join(cmd))
        return 0
    route.check(args, block)
    block_file.parent.mkdir(parents=True, exist_ok=True)
    block_file.write_text(json.dumps(block.to_json(), indent=2))
    for cmd in commands:
        print(f"+ {shlex.join(cmd)}", flush=True)
        done = subprocess.run(cmd)
        if done.returncode != 0:
            print(f"command failed with status {done.returncode}: {shlex.join(cmd)}", file=sys.stderr)
            return done.returncode
    return 0


if __name__ == "__main__":
    sys.exit(main())
