"""build_scripts/train_draft.py's arguments: the target adapter it serves, and comment noise."""
import runpy
from pathlib import Path

import pytest

from trtllm_autojudge.tasks.base import ASSETS

TRAIN_DRAFT = runpy.run_path(str(Path(__file__).resolve().parents[1] / "build_scripts" / "train_draft.py"))


def test_defaults_serve_the_shipped_adapter_on_clean_programs():
    args = TRAIN_DRAFT["parse_args"](["--task", "gsm8k-program"])
    assert args.adapter == ASSETS / args.task_obj.shipped_adapter and args.adapter.is_file()
    assert args.out == ASSETS / args.task_obj.shipped_draft
    assert args.comment_noise == 0.0


def test_a_missing_adapter_is_refused_with_how_to_make_it(tmp_path, capsys):
    with pytest.raises(SystemExit):
        TRAIN_DRAFT["parse_args"](["--task", "gsm8k-program", "--adapter", str(tmp_path / "none.safetensors")])
    assert "train_target_adapter.py" in capsys.readouterr().err
