"""Convert a Hugging Face Llama target and an EAGLE-1/2 head into a TensorRT-LLM 1.2 EAGLE checkpoint
(``rank{r}.safetensors`` + ``config.json``) with the ``autojudge_eagle`` block (:mod:`.eagle_spec`).

``python -m trtllm_autojudge.trt.engine.eagle_convert --model_dir HF_TARGET --eagle_head HEAD_DIR
--output_dir CKPT --eagle_block block.json [--dtype float16] [--tp_size N]``

The head is refused before anything is converted when it does not fit the target (hidden size,
vocabulary, tokenizer fingerprint: :func:`check_head_fits_target`). The conversion is TensorRT-LLM's
own, per rank: ``EagleForCausalLM.from_hugging_face(model_dir, dtype, mapping=Mapping(world_size=N,
rank=r, tp_size=N, pp_size=1), speculative_model_dir=head_dir, speculative_config=...)`` then
``save_checkpoint(output_dir, save_config=(rank == 0))`` -- what ``examples/eagle/convert_checkpoint.py``
does with ``--eagle_model_dir`` (the head directory is a Hugging Face Llama directory:
:meth:`trtllm_autojudge.models.eagle_head.EagleHead.save`). ``EagleConfig.from_hugging_face`` leaves
``max_draft_len`` at its default (63), so the written config gets the block's ``max_draft_len``,
``num_eagle_layers`` and ``max_non_leaves_per_layer``, and the block itself.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from types import SimpleNamespace

from ...models.eagle_head import head_differences, read_head_meta
from .convert import _set_config_key, convert_per_rank
from .eagle_spec import EAGLE_BLOCK_KEY, EagleBlock


def target_tokenizer_fingerprint(model_dir: str | Path) -> str | None:
    """The tokenizer fingerprint of a Hugging Face checkpoint with a tokenizer; None when it has none."""
    from transformers import AutoTokenizer

    from ...models.vocab_subset import tokenizer_fingerprint

    try:
        tokenizer = AutoTokenizer.from_pretrained(str(model_dir))
    except (OSError, ValueError):
        return None
    return tokenizer_fingerprint(tokenizer)


def check_head_fits_target(head: str | Path, model_dir: str | Path) -> Path:
    """The head directory, after refusing a head that does not fit the target checkpoint (ValueError
    listing every difference: hidden size, vocabulary, tokenizer fingerprint when both have one)."""
    weights, config, meta = read_head_meta(head)
    target_config = Path(model_dir) / "config.json"
    if not target_config.is_file():
        raise FileNotFoundError(f"{target_config} does not exist: --model_dir must be a Hugging Face checkpoint")
    target = json.loads(target_config.read_text())
    problems = head_differences(config, meta, int(target["hidden_size"]), int(target["vocab_size"]),
                                target_tokenizer_fingerprint(model_dir))
    if problems:
        raise ValueError(f"the EAGLE head {weights} does not fit the target {model_dir}: " + "; ".join(problems))
    if not (weights.parent / "config.json").is_file():
        raise FileNotFoundError(f"{weights.parent} has no config.json: TensorRT-LLM's converter reads the head as a "
                                f"Hugging Face directory; save it with EagleHead.save (the package's shipped head, "
                                f"which stores no embedding: python build_scripts/train_eagle.py --task TASK "
                                f"--write-head DIR)")
    return weights.parent


def write_eagle_config(checkpoint_dir: str | Path, block: EagleBlock) -> Path:
    """The engine shapes and the ``autojudge_eagle`` block in a converted checkpoint's config.json."""
    path = Path(checkpoint_dir) / "config.json"
    config = json.loads(path.read_text())
    config.update(max_draft_len=block.max_draft_len, num_eagle_layers=block.num_eagle_layers,
                  max_non_leaves_per_layer=block.max_non_leaves_per_layer)
    path.write_text(json.dumps(config, indent=2))
    return _set_config_key(checkpoint_dir, EAGLE_BLOCK_KEY, block.to_json())


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    ap = argparse.ArgumentParser(prog="python -m trtllm_autojudge.trt.engine.eagle_convert",
                                 description=__doc__.split("\n\n")[0])
    ap.add_argument("--model_dir", required=True, help="Hugging Face Llama target checkpoint directory")
    ap.add_argument("--eagle_head", required=True, help="EAGLE head directory (EagleHead.save, build_scripts/train_eagle.py)")
    ap.add_argument("--output_dir", required=True, help="TensorRT-LLM checkpoint directory to write")
    ap.add_argument("--eagle_block", required=True, help="JSON file with the autojudge_eagle block (build-engines writes it)")
    ap.add_argument("--dtype", default="float16", choices=["float16", "bfloat16", "float32"])
    ap.add_argument("--tp_size", type=int, default=1, help="tensor-parallel ranks (one rank{r}.safetensors each)")
    return ap.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    block = EagleBlock.from_dict(json.loads(Path(args.eagle_block).read_text()))
    head_dir = check_head_fits_target(args.eagle_head, args.model_dir)
    speculative = SimpleNamespace(num_eagle_layers=block.num_eagle_layers,
                                  max_non_leaves_per_layer=block.max_non_leaves_per_layer)

    def eagle(mapping):
        from tensorrt_llm.models.eagle.model import EagleForCausalLM
        return EagleForCausalLM.from_hugging_face(args.model_dir, args.dtype, mapping=mapping,
                                                  speculative_model_dir=str(head_dir), speculative_config=speculative,
                                                  use_parallel_embedding=False, embedding_sharding_dim=0)

    status = convert_per_rank(args.output_dir, args.tp_size, eagle)
    if status:
        return status
    write_eagle_config(args.output_dir, block)
    return 0


if __name__ == "__main__":
    sys.exit(main())
