"""What a step function sees: the run's business key and input, its key, its attempt,
earlier steps' results and the services object. Never a Run or Step row, never a secret."""

from collections.abc import Callable
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any


@dataclass(frozen=True)
class StepContext:
    run_id: int
    workflow: str
    business_key: str
    input: Any
    step: str
    key: str
    attempt: int
    results: MappingProxyType
    services: Any = None
    remote_ref: str = ""
    _heartbeat: Callable[[], bool] = field(default=lambda: True, repr=False)

    def heartbeat(self) -> bool:
        """Extend this worker's lease during a long step. False means the lease was lost:
        another worker owns the run now and this step's result will only be kept as evidence."""
        return self._heartbeat()
