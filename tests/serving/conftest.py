import pytest

from tiny_served_pair import TinyPair, save_tiny_pair
from trtllm_autojudge.serving.install import ServerUnavailable, TritonInstall, find_triton


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory) -> TinyPair:
    return save_tiny_pair(tmp_path_factory.mktemp("tiny-pair"))


@pytest.fixture(scope="session")
def triton() -> TritonInstall:
    """The server of the serve extra; a skip saying why where it cannot run (scripts/setup_env.sh
    installs it, except on Python 3.13+)."""
    try:
        return find_triton()
    except ServerUnavailable as e:
        pytest.skip(f"no Triton server here: {e}")
