import sys
from pathlib import Path

import pytest
import torch

sys.path.insert(0, str(Path(__file__).parent))

from tiny import byte_tokenizer, tiny_lm

# Tiny models gain nothing from intra-op threads, and on a busy 2-core machine the
# spinning OpenMP workers of one test slow everything else down.
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def tokenizer():
    return byte_tokenizer()


@pytest.fixture(scope="session")
def target():
    # peaky output head: outputs repeat themselves, so copies get accepted as well as rejected
    return tiny_lm(seed=0, sharpness=20.0)


@pytest.fixture(scope="session")
def draft(target):
    """The target with noise added: agrees with it often but not always."""
    import copy

    import torch

    model = copy.deepcopy(target)
    generator = torch.Generator().manual_seed(1)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(torch.randn(param.shape, generator=generator) * 0.02)
    return model
