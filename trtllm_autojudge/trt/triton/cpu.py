"""The CPU route's Triton repository: the context route's own models over CPU stand-ins of its engines.

``make-triton-repo --route cpu`` (and ``trtllm-autojudge serve``) writes a repository that a stock
``tritonserver`` serves on CPU (docs/serving.md). It holds the context route's ``preprocessing``
(with the task's prompt format), ``postprocessing`` and ``autojudge_bls`` (the same model file and
loop as on a GPU host; decoupled, so it streams), and in place of the engines two Python models on
the reference runtime (:mod:`.stand_ins`, model files ``models/cpu_draft.py`` and
``models/cpu_target.py``):

- ``tensorrt_llm_draft``: the draft model behind the tensorrtllm backend's input and output names
  (the GPU route's config, backend python), plus its ``stop`` input;
- ``autojudge_target``: the target and the judge behind the cycle and acceptance tensors
  (:mod:`.tensors`), plus ``stop``.

Each stand-in's version folder holds a ``config.json`` in the layout of a TensorRT-LLM engine's, for
what the BLS reads there (the vocabulary size, the ``autojudge`` block with the judge file and the
draft-tree limits, ``build_config.max_seq_len`` and ``gather_generation_logits``), plus the block
``reference_runtime``: the models as the CLI names them (``--target``, ``--draft``, ``--task``,
...), loaded as ``trtllm-autojudge generate`` loads them. Each stand-in runs as one instance, since
it keeps every request's KV cache; the BLS runs ``bls_instances`` requests at once.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict, dataclass
from pathlib import Path

from ..engine.io_spec import EngineBlock
from ..engine.routes import check_route_judge
from ..runner.packing import chain_tree
from .config import _io, repository_configs, write_repository
from .pbtxt import Enum, parameters
from .tensors import STOP_TENSOR

STAND_IN_SOURCES = {"tensorrt_llm_draft": "cpu_draft", "autojudge_target": "cpu_target"}
CPU_MODELS = ("preprocessing", "postprocessing", "tensorrt_llm_draft", "autojudge_target", "autojudge_bls")
RUNTIME_KEY = "reference_runtime"


@dataclass(frozen=True)
class ReferencePair:
    """The models of the stand-ins, named as the CLI names them (:func:`..models.loading.add_model_args`)."""

    target: str = "tuned"
    draft: str = "embedded"
    draft_vocab: str = "auto"
    task: str = "gsm8k-program"
    dtype: str = "auto"
    cpu_linear: str = "auto"
    threads: int | None = None  # torch CPU threads of each stand-in (None: torch's choice)

    def args(self) -> argparse.Namespace:
        """The namespace :func:`..models.loading.load_pair` reads."""
        return argparse.Namespace(**asdict(self), device="cpu")


def resolve_pair(pair: ReferencePair, judge: str | None, k: int) -> tuple[Path, Path, dict]:
    """(judge file, tokenizer folder, the target checkpoint's config) of ``pair``, checked: the
    judge is, unless given, the task's shipped one for the embedded pair on a chain of ``k`` draft
    tokens (as ``generate --k`` picks it), and must be one the context route runs. Reads configs
    only, no weights. Raises ValueError saying what to pass."""
    from transformers import AutoConfig

    from ...judge.head import JudgeHead
    from ...models.embedded import converted_checkpoint
    from ...models.loading import EMBEDDED_TARGETS
    from ...tasks import load_task

    embedded = pair.target in EMBEDDED_TARGETS and pair.draft == "embedded"
    if judge is None and not embedded:
        raise ValueError("give the judge file of your models (--judge; trtllm-autojudge train makes one)")
    path = Path(judge) if judge is not None else load_task(pair.task).shipped_judge_path(k)
    if path is None or not path.is_file():
        raise ValueError(f"judge file {path} not found" if path else f"task {pair.task} ships no judge: give --judge")
    path = path.resolve()
    check_route_judge("triton-context", JudgeHead.load(path))
    folder = converted_checkpoint() if pair.target in EMBEDDED_TARGETS else Path(pair.target).expanduser().resolve()
    if not (folder / "config.json").is_file():
        raise ValueError(f"--target {pair.target}: {folder} is no checkpoint folder (it has no config.json)")
    return path, folder, AutoConfig.from_pretrained(folder, local_files_only=True).to_dict()


def stand_in_configs(pair: ReferencePair, judge_file: Path, target_config: dict, max_draft_tokens: int,
                     max_draft_width: int) -> tuple[dict, dict]:
    """The ``config.json`` of the draft and of the target stand-in (module docstring)."""
    tree = chain_tree(max_draft_tokens, max_draft_width)
    block = EngineBlock(judge_file=str(judge_file), plugin_library="", max_requests=1, max_draft_nodes=tree.num_nodes,
                        max_paths=len(tree.paths), max_path_len=max_draft_tokens + 1)
    context = int(target_config["max_position_embeddings"])
    runtime = {RUNTIME_KEY: asdict(pair)}
    draft = {"pretrained_config": {"vocab_size": int(target_config["vocab_size"])},
             "build_config": {"max_seq_len": context, "gather_generation_logits": True}, **runtime}
    target = {"pretrained_config": {"vocab_size": int(target_config["vocab_size"]), "autojudge": block.to_json()},
              "build_config": {"max_seq_len": context}, **runtime}
    return draft, target


def cpu_repository_configs(repo: Path, tokenizer_dir: Path, task: str, bls_instances: int) -> dict[str, dict]:
    """Model name -> ModelConfig of the CPU route (absolute paths under ``repo``)."""
    draft_dir, target_dir = repo / "tensorrt_llm_draft" / "1", repo / "autojudge_target" / "1"
    configs = repository_configs(draft_engine_dir=str(draft_dir), target_engine_dir=str(target_dir),
                                 tokenizer_dir=str(tokenizer_dir), max_batch_size=bls_instances,
                                 bls_instances=bls_instances, decoupled=True, task=task)
    stop = _io(STOP_TENSOR[0], STOP_TENSOR[1], [1], optional=True)
    draft = configs["tensorrt_llm_draft"]
    draft.update(backend="python", parameters=parameters({"engine_dir": str(draft_dir)}))
    draft["input"] = draft["input"] + [{**stop, "reshape": {"shape": []}}]
    target = configs["autojudge_target"]
    target["instance_group"] = [{"count": 1, "kind": Enum("KIND_CPU")}]
    target["input"] = target["input"] + [stop]
    configs["autojudge_bls"]["parameters"] += parameters({"keyed_caches": "true"})
    return configs


def make_cpu_repository(out_dir: str | Path, pair: ReferencePair = ReferencePair(), judge: str | None = None,
                        max_draft_tokens: int = 16, max_draft_width: int = 1, bls_instances: int = 4) -> list[Path]:
    """Write the CPU route's repository for ``pair`` (the judge: ``judge``, default the task's shipped
    one for a chain of ``max_draft_tokens``, the requests' default); requests may ask for up to
    ``max_draft_tokens`` draft tokens of up to ``max_draft_width`` candidates. Returns the config.pbtxt
    paths."""
    if max_draft_tokens < 1 or max_draft_width < 1 or bls_instances < 1:
        raise ValueError(f"max_draft_tokens, max_draft_width and bls_instances must be at least 1, got "
                         f"{max_draft_tokens}, {max_draft_width}, {bls_instances}")
    repo = Path(out_dir).expanduser().absolute()
    judge_file, tokenizer_dir, target_config = resolve_pair(pair, judge, max_draft_tokens)
    written = write_repository(repo, cpu_repository_configs(repo, tokenizer_dir, pair.task, bls_instances),
                               STAND_IN_SOURCES)
    for name, config in zip(("tensorrt_llm_draft", "autojudge_target"),
                            stand_in_configs(pair, judge_file, target_config, max_draft_tokens, max_draft_width)):
        (repo / name / "1" / "config.json").write_text(json.dumps(config, indent=1))
    return written


def load_stand_in_model(engine_dir: str | Path, role: str):
    """(config.json of a stand-in's folder, its model): ``role`` "draft" or "target", loaded from the
    block ``reference_runtime`` as ``trtllm-autojudge generate`` loads the pair (a draft of its own
    folder without the target). Errors name the file or folder that is missing."""
    from ...models.loading import load_draft_model, load_target_model
    from ...tasks import load_task

    path = Path(engine_dir) / "config.json"
    config = json.loads(path.read_text())
    pair = ReferencePair(**config[RUNTIME_KEY])
    try:
        task = load_task(pair.task)
        if role == "target":
            return config, load_target_model(pair.args(), task)[0]
        return config, load_draft_model(pair.args(), task)
    except (SystemExit, OSError, ValueError) as e:  # the loaders' messages name what is missing
        raise RuntimeError(f"the {role} of {path} did not load: {e}") from None
