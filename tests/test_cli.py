"""The verb router: every verb parses --help; unknown verbs and bad arguments exit non-zero."""
import pytest

from trtllm_autojudge.cli import VERBS, main


def test_lists_verbs(capsys):
    assert main([]) == 2
    out = capsys.readouterr().out
    assert all(verb in out for verb in VERBS)
    assert main(["--help"]) == 0


def test_unknown_verb(capsys):
    assert main(["frobnicate"]) == 2
    assert "unknown verb" in capsys.readouterr().err


@pytest.mark.parametrize("verb", sorted(VERBS))
def test_every_verb_has_help(verb, capsys):
    with pytest.raises(SystemExit) as exc:
        main([verb, "--help"])
    assert exc.value.code == 0
    assert "usage" in capsys.readouterr().out.lower()


def test_missing_required_argument():
    with pytest.raises(SystemExit) as exc:
        main(["mine"])  # --out is required
    assert exc.value.code == 2
