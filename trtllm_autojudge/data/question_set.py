"""A question set named by how to regenerate it, never by a file of one machine.

A certificate, an eval summary and a bench result record the questions they ran on as a
*question-set record* (a dict):

- ``recipe``: the command that writes the same questions again, e.g.
  ``python build_scripts/heldout_questions.py --task gsm8k-program --per-template 20 --seed 57721``
  (``build_scripts/heldout_questions.py`` writes it beside its JSONL as ``NAME.set.json``), or the
  verb's own draw (``--split train --variants-per-template 5 --seed 31337``); None for a user's
  file with no manifest;
- ``seed``, ``count`` and ``ids_sha256``: a digest of the question ids in order (each id is a hash
  of the question's text, :func:`~trtllm_autojudge.mining.cli.problem_id`), so whoever regenerates
  the set can check it is the same, and a certificate can be checked against its own
  ``question_ids`` without the questions;
- ``file``: the JSONL's name (no folder), when the questions came from one.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

MANIFEST_SUFFIX = ".set.json"


def ids_digest(question_ids: list[str]) -> str:
    """16 hex digits of SHA-256 over the question ids, in order."""
    return hashlib.sha256("\n".join(question_ids).encode()).hexdigest()[:16]


def manifest_path(jsonl: str | Path) -> Path:
    """Where a question file's manifest lies: ``out/calib.jsonl`` -> ``out/calib.set.json``."""
    path = Path(jsonl)
    return path.with_name(path.name.removesuffix(".jsonl") + MANIFEST_SUFFIX)


def set_record(question_ids: list[str], recipe: str | None, seed: int | None, file: str | None = None) -> dict:
    """A question-set record (module docstring) of ``question_ids``, [Q] ids in the order they ran."""
    record = {"recipe": recipe, "seed": seed, "count": len(question_ids), "ids_sha256": ids_digest(question_ids)}
    if file is not None:
        record["file"] = Path(file).name
    return record


def write_manifest(jsonl: str | Path, record: dict) -> Path:
    path = manifest_path(jsonl)
    path.write_text(json.dumps(record, indent=1) + "\n")
    return path


def file_record(jsonl: str | Path, question_ids: list[str]) -> dict:
    """The record of the questions read from ``jsonl`` ([Q] ids, after any ``--limit``): its manifest's
    recipe when it has one and its questions are the manifest's (or their first ``limit``), else the
    file's name with no recipe."""
    path = manifest_path(jsonl)
    manifest = json.loads(path.read_text()) if path.is_file() else None
    record = set_record(question_ids, None, None, file=jsonl)
    if manifest is None:
        return record
    if manifest.get("count") == len(question_ids) and manifest.get("ids_sha256") == record["ids_sha256"]:
        return {**record, "recipe": manifest["recipe"], "seed": manifest.get("seed")}
    return {**record, "recipe": manifest["recipe"], "seed": manifest.get("seed"),
            "part_of": {"count": manifest.get("count"), "ids_sha256": manifest.get("ids_sha256")}}


def check_record(record: dict, question_ids: list[str]) -> None:
    """Refuse a record whose count or digest does not match ``question_ids``, naming the field."""
    if "ids_sha256" not in record:
        raise ValueError("the question set names no ids_sha256: it cannot be checked or regenerated; calibrate "
                         "again on a set written by build_scripts/heldout_questions.py")
    if record.get("count") != len(question_ids):
        raise ValueError(f"question_set.count {record.get('count')} differs from the {len(question_ids)} question ids")
    digest = ids_digest(question_ids)
    if record["ids_sha256"] != digest:
        raise ValueError(f"question_set.ids_sha256 {record['ids_sha256']} does not match the question ids ({digest})")


def describe(record: dict) -> str:
    """The record as a user reads it: the recipe (or the file's name) and the digest."""
    source = record.get("recipe") or f"{record.get('file', 'a file')} (no recipe)"
    part = " (the first of its questions)" if record.get("part_of") else ""
    return f"{source}{part}; ids sha256 {record.get('ids_sha256')}"
