"""Where the project caches what it can remake: the converted embedded checkpoint
(:mod:`.models.embedded`), template-variant questions (:mod:`.data.question_cache`) and the
training scripts' work folders."""
from __future__ import annotations

import os
from pathlib import Path

CACHE_ENV = "AUTOJUDGE_CACHE"


def cache_root() -> Path:
    """``$AUTOJUDGE_CACHE``, else ``$XDG_CACHE_HOME/trtllm-autojudge``, else ``~/.cache/trtllm-autojudge``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV]).expanduser()
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "trtllm-autojudge"
