import pytest

from tiny_served_pair import TinyPair, save_tiny_pair


@pytest.fixture(scope="session")
def tiny_checkpoints(tmp_path_factory) -> TinyPair:
    return save_tiny_pair(tmp_path_factory.mktemp("tiny-pair"))
