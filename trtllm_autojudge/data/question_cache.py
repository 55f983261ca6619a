"""The questions of template variants, cached on disk: what held-out sets are checked against.

Every verb that runs held-out instances drops the questions that the shipped adapter, draft and
judge were trained or mined on (:meth:`trtllm_autojudge.tasks.Task.trained_questions`): 9,364
template variants for the program pair, which take 46 s to draw on 2 cores (rejection sampling
against the templates' conditions). Drawn once, they are kept as JSON under
``cache_root()/questions`` (:mod:`trtllm_autojudge.cache_dir`), one file per (split, per_template,
seed).

A file is named by a fingerprint of everything that decides the draws: the Python version, the
sources of this package (``trtllm_autojudge/data/*.py``) and the template files
(``templates_dir()``). An edit to any of them gives a new fingerprint, so a stale file is never
read; writing a file removes the files of other fingerprints (so two checkouts of different sources
that share one cache folder evict each other's files, and each draws again). A missing, unreadable
or mismatching file is drawn again (and rewritten).
"""
from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import tempfile
from functools import lru_cache
from pathlib import Path

from ..cache_dir import cache_root
from .gsm8k import variant_instances
from .templates import templates_dir

log = logging.getLogger(__name__)

FORMAT = 1
FOLDER = "questions"


@lru_cache(maxsize=1)
def draws_fingerprint() -> str:
    """sha256 over the Python version (its ``random`` draws), the package's sources and the template
    files, by relative path and content."""
    digest = hashlib.sha256(f"format {FORMAT}\npython {sys.version_info[0]}.{sys.version_info[1]}\n".encode())
    for root, pattern in ((Path(__file__).resolve().parent, "*.py"), (templates_dir(), "**/*")):
        for path in sorted(p for p in root.glob(pattern) if p.is_file()):
            digest.update(f"{path.relative_to(root).as_posix()}\n".encode())
            digest.update(path.read_bytes())
    return digest.hexdigest()


def _file(folder: Path, split: str, per_template: int, seed: int, fingerprint: str) -> Path:
    return folder / f"variants-{split}-{per_template}-{seed}-{fingerprint[:16]}.json"


def _read(path: Path, key: dict) -> list[str] | None:
    if not path.is_file():
        return None
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
        if isinstance(record, dict) and {k: record.get(k) for k in key} == key \
                and isinstance(record.get("questions"), list) and all(isinstance(q, str) for q in record["questions"]):
            return record["questions"]
        log.warning("%s is not the cached questions of %s: drawing them again", path, key)
    except (OSError, ValueError, KeyError, TypeError) as exc:
        log.warning("cannot read the cached questions %s (%s): drawing them again", path, exc)
    return None


def _write(path: Path, key: dict, questions: list[str]) -> None:
    """Write through a temporary file and rename (concurrent ranks may write the same file); then
    remove the files of other fingerprints. A folder that cannot be written costs only the cache."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            json.dump({**key, "questions": questions}, f)
        os.replace(tmp, path)
        for old in path.parent.glob("variants-*.json"):
            if not old.name.endswith(f"-{key['fingerprint'][:16]}.json"):
                old.unlink(missing_ok=True)
    except OSError as exc:
        log.warning("cannot cache the template-variant questions in %s (%s): they will be drawn again next time",
                    path.parent, exc)


@lru_cache(maxsize=None)
def variant_questions(split: str, per_template: int, seed: int) -> tuple[str, ...]:
    """The questions of :func:`.gsm8k.variant_instances` ``(split, per_template, seed)``, in its order
    (no template skipped beyond its own), read from the cache when it holds them."""
    fingerprint = draws_fingerprint()
    key = {"format": FORMAT, "split": split, "per_template": per_template, "seed": seed, "fingerprint": fingerprint}
    path = _file(cache_root() / FOLDER, split, per_template, seed, fingerprint)
    questions = _read(path, key)
    if questions is None:
        label = f"drawing {per_template} variants per {split} template (seed {seed}; once, then cached)"
        questions = [i.problem.question for i in variant_instances(split, per_template, seed, progress=label)]
        _write(path, key, questions)
    return tuple(questions)
