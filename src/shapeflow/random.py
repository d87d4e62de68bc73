"""Random number generation: a Generator object and a global default one."""

from __future__ import annotations

import numpy as np


class Generator:
    """A seeded source of random numbers (as `torch.Generator`), backed by NumPy's PCG64."""

    def __init__(self, device: str = "cpu") -> None:
        self.device = device
        self._seed = 0
        self.rng = np.random.default_rng(0)

    def manual_seed(self, seed: int) -> Generator:
        self._seed = int(seed)
        self.rng = np.random.default_rng(self._seed)
        return self

    def seed(self) -> int:
        seed = int(np.random.SeedSequence().entropy % (2**63))
        self.manual_seed(seed)
        return seed

    def initial_seed(self) -> int:
        return self._seed

    def get_state(self) -> dict:
        return self.rng.bit_generator.state

    def set_state(self, state: dict) -> None:
        self.rng.bit_generator.state = state


default_generator = Generator()


def manual_seed(seed: int) -> Generator:
    """Seed the default generator (as `torch.manual_seed`)."""
    return default_generator.manual_seed(seed)


def seed() -> int:
    return default_generator.seed()


def initial_seed() -> int:
    return default_generator.initial_seed()


def get_rng(generator: Generator | None) -> np.random.Generator:
    return (generator or default_generator).rng
