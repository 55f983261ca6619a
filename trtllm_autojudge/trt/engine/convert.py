"""Convert a Hugging Face Llama checkpoint to a TensorRT-LLM 1.2 checkpoint (``rank{r}.safetensors``
+ ``config.json``), and write the AutoJudge block into its config: ``autojudge`` for the target,
``autojudge_draft`` for a draft that returns its hidden states (judges with the blocks DD or DD1,
:mod:`.draft_spec`),
``autojudge_stock`` for the stock route's target (:mod:`.stock_spec`).

``python -m trtllm_autojudge.trt.engine.convert --model_dir HF --output_dir CKPT --dtype float16 --tp_size N
[--autojudge_block block.json | --stock_block block.json | --draft_hidden_output]``

The conversion is TensorRT-LLM's own: per rank, ``LLaMAForCausalLM.from_hugging_face(model_dir,
dtype, mapping=Mapping(world_size=N, rank=r, tp_size=N, pp_size=1))`` then
``save_checkpoint(output_dir, save_config=(rank == 0))`` -- what
``examples/models/core/llama/convert_checkpoint.py`` does for an unquantized model (that script is
not in the wheel, the API is). Quantized conversions: use that script, then add the block with
:func:`write_autojudge_block`.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Callable

from .draft_spec import DRAFT_BLOCK_KEY, draft_block
from .io_spec import BLOCK_KEY, EngineBlock
from .stock_spec import STOCK_BLOCK_KEY, StockBlock


def _set_config_key(checkpoint_dir: str | Path, key: str, value: dict) -> Path:
    path = Path(checkpoint_dir) / "config.json"
    if not path.is_file():
        raise FileNotFoundError(f"{path} does not exist: convert the checkpoint first")
    config = json.loads(path.read_text())
    config[key] = value
    path.write_text(json.dumps(config, indent=2))
    return path


def write_autojudge_block(checkpoint_dir: str | Path, block: EngineBlock) -> Path:
    """Add (or replace) the ``autojudge`` block in a TensorRT-LLM checkpoint's config.json."""
    return _set_config_key(checkpoint_dir, BLOCK_KEY, block.to_json())


def write_stock_block(checkpoint_dir: str | Path, block: StockBlock) -> Path:
    """Add (or replace) the ``autojudge_stock`` block: build this target with :mod:`.stock_model_cls`."""
    return _set_config_key(checkpoint_dir, STOCK_BLOCK_KEY, block.to_json())


def write_draft_block(checkpoint_dir: str | Path) -> Path:
    """Add (or replace) the ``autojudge_draft`` block: build this draft with :mod:`.draft_model_cls`."""
    return _set_config_key(checkpoint_dir, DRAFT_BLOCK_KEY, draft_block())


def convert_per_rank(output_dir: str | Path, tp_size: int, from_hugging_face: Callable) -> int:
    """TensorRT-LLM's conversion, one ``rank{r}.safetensors`` per tensor-parallel rank (the config
    written by rank 0): ``from_hugging_face(mapping)`` converts one rank. Returns 0, or 2 (with a
    message) when tensorrt_llm is not importable."""
    try:
        from tensorrt_llm import Mapping
    except ImportError as e:
        print(f"tensorrt_llm is not importable ({e}): converting checkpoints needs tensorrt-llm==1.2.* on a GPU host "
              f"(docs/deploy.md)", file=sys.stderr)
        return 2
    Path(output_dir).mkdir(parents=True, exist_ok=True)
    for rank in range(tp_size):
        model = from_hugging_face(Mapping(world_size=tp_size, rank=rank, tp_size=tp_size, pp_size=1))
        model.save_checkpoint(str(output_dir), save_config=(rank == 0))
        del model
    return 0


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m trtllm_autojudge.trt.engine.convert", description=__doc__.split("\n\n")[0])
    ap.add_argument("--model_dir", required=True, help="Hugging Face Llama checkpoint directory")
    ap.add_argument("--output_dir", required=True, help="TensorRT-LLM checkpoint directory to write")
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    ap.add_argument("--tp_size", type=int, default=1, help="tensor-parallel ranks (one rank{r}.safetensors each)")
    kind = ap.add_mutually_exclusive_group()
    kind.add_argument("--autojudge_block", help="JSON file with the target's autojudge block (context route)")
    kind.add_argument("--stock_block", help="JSON file with the target's autojudge_stock block (stock route)")
    kind.add_argument("--draft_hidden_output", action="store_true",
                      help="draft for a judge with the blocks DD or DD1: write the autojudge_draft block (build "
                           "with draft_model_cls.py)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    block = EngineBlock.from_dict(json.loads(Path(args.autojudge_block).read_text())) if args.autojudge_block else None
    stock = StockBlock.from_dict(json.loads(Path(args.stock_block).read_text())) if args.stock_block else None

    def llama(mapping):
        from tensorrt_llm.models import LLaMAForCausalLM
        return LLaMAForCausalLM.from_hugging_face(args.model_dir, args.dtype, mapping=mapping)

    status = convert_per_rank(args.output_dir, args.tp_size, llama)
    if status:
        return status
    if block is not None:
        write_autojudge_block(args.output_dir, block)
    if stock is not None:
        write_stock_block(args.output_dir, stock)
    if args.draft_hidden_output:
        write_draft_block(args.output_dir)
    return 0


if __name__ == "__main__":
    sys.exit(main())
