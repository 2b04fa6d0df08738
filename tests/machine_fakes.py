"""A stand-in for generation.contention.OtherLoad: a machine with a set amount of other work."""

from generation.contention import OTHER_CORES_LIMIT


class FakeLoad:
    def __init__(self, other_cores: float = 0.0) -> None:
        self.other_cores = other_cores

    def __enter__(self) -> "FakeLoad":
        return self

    def __exit__(self, *exc) -> None:
        return None

    @property
    def disturbed(self) -> bool:
        return self.other_cores > OTHER_CORES_LIMIT
