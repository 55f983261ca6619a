"""What `build-engines --dry-run` prints, read back: the autojudge block and the commands."""
import json
import shlex


def read_dry_run(text: str) -> tuple[dict, list[list[str]]]:
    """(the block printed after the '# FILE' line, each command that follows as its argv)."""
    out = text.splitlines()
    end = out.index("}")
    return json.loads("\n".join(out[1:end + 1])), [shlex.split(line) for line in out[end + 1:]]


def flag(cmd: list[str], name: str) -> str:
    """The value after ``name`` in ``cmd``."""
    return cmd[cmd.index(name) + 1]
