"""experiments/judge_label_sources.py and judge/probe.py: which labels make a draft's judge."""
import json
import runpy
from pathlib import Path

import numpy as np
import pytest

from trtllm_autojudge.judge.dataset import FeatureSet
from trtllm_autojudge.judge.probe import harmless_at

MAIN = runpy.run_path(str(Path(__file__).resolve().parents[1] / "experiments" / "judge_label_sources.py"))["main"]
H = 6  # target hidden size


def _set(path: Path, direction: int, seed: int, target_model: str = "tiny-target", n_prompts: int = 40) -> Path:
    """Harmful iff the feature along ``direction`` is positive (plus a little noise): each draft's own rule."""
    rng = np.random.default_rng(seed)
    M = n_prompts * 10
    X = rng.normal(size=(M, H)).astype(np.float32)  # [M, H]
    y = (X[:, direction] + 0.1 * rng.normal(size=M) > 0).astype(np.int8)  # [M]
    FeatureSet(features=X, labels=y, prompt_index=np.repeat(np.arange(n_prompts), 10), position=np.arange(M) % 10,
               setup="DT", draft_hidden=4, target_hidden=H, draft_model="d", target_model=target_model,
               task="t", dtype="float32").save(path)
    return path


def test_harmless_at_cuts_at_the_harmful_share():
    probs = np.array([0.1, 0.2, 0.3, 0.4, 0.05, 0.5, 0.6, 0.7])  # [M]
    labels = np.array([0, 0, 0, 0, 1, 1, 1, 1])  # [M]
    assert harmless_at(probs, labels, 0.0) == 0.0  # the cut is the smallest harmful score, 0.05
    assert harmless_at(probs, labels, 0.25) == 1.0  # the cut is the second smallest, 0.5


def test_own_labels_beat_another_drafts_and_the_json_holds_every_seed(tmp_path, capsys):
    own, other = _set(tmp_path / "own.safetensors", 0, 1), _set(tmp_path / "other.safetensors", 1, 2)
    out = tmp_path / "sources.json"
    assert MAIN(["--validate-on", f"eagle={own}", "--other", f"archive={other}", "--seeds", "3,4", "--out", str(out)]) == 0
    result = json.loads(out.read_text())
    mean = result["setups"]["DT"]["mean"]
    assert set(mean) == {"eagle", "archive", "all"}
    assert mean["eagle"]["val_roc_auc"] > 0.95 > 0.7 > mean["archive"]["val_roc_auc"]
    assert mean["eagle"]["val_roc_auc"] >= mean["all"]["val_roc_auc"] > mean["archive"]["val_roc_auc"]
    assert set(result["setups"]["DT"]["per_seed"]) == {"3", "4"}
    assert result["validate_on"]["prompts"] == 40
    assert "archive" in capsys.readouterr().out


def test_refuses_draft_setups_and_another_target(tmp_path):
    own, other = _set(tmp_path / "own.safetensors", 0, 1), _set(tmp_path / "o.safetensors", 1, 2, target_model="x")
    with pytest.raises(SystemExit, match=r"setups \['DD-DT'\] read the draft's hidden states"):
        MAIN(["--validate-on", f"e={own}", "--other", f"a={own}", "--setups", "DD-DT"])
    with pytest.raises(SystemExit, match="--other a: features of x in float32, but --validate-on e has tiny-target"):
        MAIN(["--validate-on", f"e={own}", "--other", f"a={other}"])
    with pytest.raises(SystemExit):
        MAIN(["--validate-on", f"{own}", "--other", f"a={other}"])  # no NAME=
