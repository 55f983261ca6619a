"""Question sets named by how to regenerate them (data/question_set.py, build_scripts/heldout_questions.py)."""
import json
import runpy
from pathlib import Path

import pytest

from trtllm_autojudge.data.question_set import check_record, describe, file_record, ids_digest, manifest_path, set_record
from trtllm_autojudge.evaluation.certificate import Certificate
from trtllm_autojudge.judge.head import JudgeHead
from trtllm_autojudge.mining.cli import problem_id
from trtllm_autojudge.data.problem import Problem
from trtllm_autojudge.tasks.base import ASSETS
from toy_task import ToyTask

REPO = Path(__file__).resolve().parents[1]


class SeededTask(ToyTask):
    """Two templates whose variants depend on the seed, some shared between seeds (as templates with
    few distinct values draw the same question under two seeds)."""

    def problems(self, split, originals, variants_per_template, seed):
        return [Problem(f"t{t} v{(seed * 7 + i) % 10}", "unused", "0", template_id=t, source="variant")
                for t in (0, 1) for i in range(variants_per_template)]


def test_a_record_names_its_recipe_count_and_digest(tmp_path):
    ids = ["a1", "b2", "c3"]
    record = set_record(ids, "python build_scripts/heldout_questions.py --seed 9", 9, file=tmp_path / "x.jsonl")
    assert record == {"recipe": "python build_scripts/heldout_questions.py --seed 9", "seed": 9, "count": 3,
                      "ids_sha256": ids_digest(ids), "file": "x.jsonl"}  # the name, never the folder
    assert ids_digest(ids) != ids_digest(ids[::-1])  # the order the questions ran in is part of the set
    check_record(record, ids)
    with pytest.raises(ValueError, match="question_set.count 3 differs from the 2 question ids"):
        check_record(record, ids[:2])
    assert describe(record) == f"python build_scripts/heldout_questions.py --seed 9; ids sha256 {ids_digest(ids)}"


def test_a_file_with_a_manifest_is_named_by_its_recipe(tmp_path):
    jsonl = tmp_path / "calib.jsonl"
    assert manifest_path(jsonl).name == "calib.set.json"
    ids = ["a1", "b2", "c3"]
    assert file_record(jsonl, ids)["recipe"] is None  # no manifest: the file's name only
    manifest_path(jsonl).write_text(json.dumps(set_record(ids, "RECIPE", 4, file=jsonl)))
    assert file_record(jsonl, ids) == set_record(ids, "RECIPE", 4, file=jsonl)
    first = file_record(jsonl, ids[:2])  # a --limit took the first two
    assert first["recipe"] == "RECIPE" and first["count"] == 2 and first["part_of"]["count"] == 3
    assert "(the first of its questions)" in describe(first)


def test_heldout_questions_writes_a_manifest_that_regenerates_the_file(tmp_path):
    """The script's manifest holds a recipe that writes the same questions again, and --exclude-draw
    leaves out another seed's whole draw. A toy task keeps this fast."""
    main = runpy.run_path(str(REPO / "build_scripts" / "heldout_questions.py"))["main"]
    out = tmp_path / "a.jsonl"
    assert main(["--task", "test_question_set:SeededTask", "--per-template", "3", "--seed", "1", "--out", str(out)]) == 0
    record = json.loads(manifest_path(out).read_text())
    rows = [json.loads(line)["question"] for line in out.read_text().splitlines()]
    assert record["count"] == len(rows) > 0 and record["ids_sha256"] == ids_digest([problem_id(q) for q in rows])
    again = tmp_path / "b.jsonl"
    args = record["recipe"].split()[2:] + ["--out", str(again)]
    assert main(args) == 0 and again.read_text() == out.read_text()
    disjoint = tmp_path / "c.jsonl"
    assert main(["--task", "test_question_set:SeededTask", "--per-template", "5", "--seed", "2", "--exclude-draw", "1:3",
                 "--out", str(disjoint)]) == 0  # seed 2 draws v4..v8 of each template, seed 1 v7..v9
    kept = [json.loads(line)["question"] for line in disjoint.read_text().splitlines()]
    assert kept == ["t0 v4", "t1 v4", "t0 v5", "t1 v5", "t0 v6", "t1 v6"]  # round order, after the exclusion
    assert "--exclude-draw 1:3" in json.loads(manifest_path(disjoint).read_text())["recipe"]


@pytest.mark.parametrize("asset", sorted(p.name for p in ASSETS.glob("judge*.safetensors")))
def test_every_shipped_certificate_names_a_regenerable_question_set(asset):
    """Each certificate in the package names its calibration questions by the command that writes
    them again, and its digest matches the ids it holds (checked on load)."""
    certificate = Certificate.from_meta(JudgeHead.load(ASSETS / asset).meta.get("certificate"))
    if certificate is None:
        pytest.skip(f"{asset} has no certificate (an uncalibrated judge)")
    record = certificate.question_set
    assert record["recipe"].startswith("python build_scripts/heldout_questions.py --task ")
    assert f"--seed {record['seed']}" in record["recipe"] and record["count"] == certificate.questions
    assert record["ids_sha256"] == ids_digest(certificate.question_ids)


class TrainedTask(SeededTask):
    def trained_questions(self):
        return {"t0 v1"}


def test_a_held_out_file_that_overlaps_training_is_refused_naming_the_count(tmp_path):
    """calibrate, eval and bench read --questions as held out: a file holding questions the shipped
    models were trained or mined on is refused, naming how many, not silently used."""
    import argparse

    from trtllm_autojudge.data.sources import load_problems

    path = tmp_path / "q.jsonl"
    path.write_text('{"question": "t0 v1", "answer": "0"}\n{"question": "t0 v2", "answer": "0"}\n')
    args = argparse.Namespace(questions=str(path), limit=None)
    with pytest.raises(SystemExit, match="1 of the 2 questions of .* are training-template questions"):
        load_problems(args, TrainedTask(), held_out=True)
    assert len(load_problems(args, TrainedTask(), held_out=False)) == 2  # mining may use them
