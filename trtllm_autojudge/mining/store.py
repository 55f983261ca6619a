"""Append-only JSONL label store: one record per prompt; killing a run loses at most the record
being written, and a rerun resumes where it stopped.

Record fields: ``id``, ``prompt_ids``, ``response_ids`` (the target's original response),
``final_ids`` (the running sequence after all decisions: the draft tokens of unimportant
mismatches are in it), ``target_answer``, ``labels`` (``[position, important, target_token,
draft_token]`` each, positions index ``final_ids``), ``alt_answers`` (one per label), ``cost``.
"""
from __future__ import annotations

import gzip
import json
import os
import sys
from pathlib import Path

REQUIRED = ("id", "prompt_ids", "final_ids", "labels")


def read_records(path: str | Path, warn: bool = True, required: tuple[str, ...] = REQUIRED) -> tuple[list[dict], list[str]]:
    """All valid records; problems (bad lines) are reported as 'FILE:LINE: why' and skipped.
    A ``.gz`` file is read through gzip (label sets kept in the repository, :func:`write_gzip`)."""
    path = Path(path)
    records, problems = [], []
    if not path.exists():
        return records, problems
    with (gzip.open if path.suffix == ".gz" else open)(path, "rb") as f:
        for lineno, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            why = None
            try:
                rec = json.loads(raw)
                if not isinstance(rec, dict) or any(k not in rec for k in required):
                    why = f"a record needs the fields {required}"
            except (json.JSONDecodeError, UnicodeDecodeError) as e:
                kind = "corrupt" if raw.endswith(b"\n") else "truncated"
                why = f"{kind} JSON ({e})"
            if why:
                problems.append(f"{path}:{lineno}: {why}; skipped, the other records are kept")
            else:
                records.append(rec)
    if warn:
        for p in problems:
            print(f"warning: {p}", file=sys.stderr)
    return records, problems


def repair_tail(path: str | Path) -> bool:
    """Cut a partial last line (a run killed mid-write) so appends start on a fresh line."""
    path = Path(path)
    if not path.exists() or path.stat().st_size == 0:
        return False
    with open(path, "rb+") as f:
        data = f.read()
        if data.endswith(b"\n"):
            return False
        cut = data.rfind(b"\n") + 1
        f.truncate(cut)
    print(f"warning: {path}: dropped a partial last record ({len(data) - cut} bytes) from an interrupted run",
          file=sys.stderr)
    return True


def append_record(path: str | Path, record: dict) -> None:
    """Write one record as one line and make it durable before returning."""
    line = json.dumps(record, separators=(",", ":")) + "\n"
    with open(path, "a", encoding="utf-8") as f:
        f.write(line)
        f.flush()
        os.fsync(f.fileno())


def write_gzip(path: str | Path, records: list[dict]) -> None:
    """All ``records`` as gzip-compressed JSONL, replacing ``path`` atomically; the same records give
    the same bytes (no timestamp in the gzip header), so a committed label set changes only when they do."""
    path = Path(path)
    tmp = path.with_name(path.name + ".writing")
    with open(tmp, "wb") as raw, gzip.GzipFile(fileobj=raw, mode="wb", mtime=0, filename="") as f:
        for rec in records:
            f.write((json.dumps(rec, separators=(",", ":")) + "\n").encode())
    os.replace(tmp, path)


def unimportant_map(records: list[dict]) -> dict[tuple[int, ...], set[int]]:
    """prefix -> draft tokens that mining found harmless right after it (for the oracle rule)."""
    table: dict[tuple[int, ...], set[int]] = {}
    for rec in records:
        seq = rec["final_ids"]
        for pos, important, _target, draft in rec["labels"]:
            if not important:
                table.setdefault(tuple(seq[:pos]), set()).add(int(draft))
    return table
