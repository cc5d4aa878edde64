"""The backend interface: what the engine's shared code asks of a Keras backend, and nothing more.

Each backend is one folder (engine/tensorflow/, engine/jax/) whose package defines `BACKEND`, an
instance of a subclass of `Backend`; engine/backends.py maps the spec's backend names to those
folders by name. A backend's modules import the engine's shared modules (measured, calibration,
workloads, probe, frameworks …); the shared modules reach a backend only through `backends.get(name)`.
Nothing here, nor in a backend's package module, imports the framework: every method imports it
when called, in the run's own process.
"""

from __future__ import annotations

import abc
from typing import Callable, Optional

from dashbench.core.spec import RunSpec
from dashbench.results.result import RunResult

Event = Callable[[dict], None]


class Backend(abc.ABC):
    name: str  # the spec's name for it (RunSpec.backend, --backend)
    display_name: str  # how its messages name the framework: "... but JAX sees no GPU"
    # The head of the one line that says a TPU is missing, where the host shows no TPU.
    no_tpu: str
    # A named TPU (--tpu NAME) is a remote one this backend connects to; one not found is the run's to say.
    remote_tpu: bool = False

    # -- running -------------------------------------------------------------------------------

    @abc.abstractmethod
    def run(self, spec: RunSpec, on_event: Optional[Event] = None) -> RunResult:
        """The measured loop: train as the spec says and return the measured result."""

    @abc.abstractmethod
    def run_to_accuracy(self, spec: RunSpec, on_event: Optional[Event] = None) -> RunResult:
        """Train to the spec's target accuracy (or for its epochs), evaluating the held-out split
        (engine/to_accuracy.py holds the rules; the backend gives its Trainer)."""

    @abc.abstractmethod
    def set_random_seed(self, seed: int) -> None:
        """Seed Python, numpy and Keras so that the next model's weights come from `seed`."""

    # -- the framework and its devices ---------------------------------------------------------

    @abc.abstractmethod
    def import_framework(self):
        """Import the framework quietly (its C++ start-up lines turned down) and return its module."""

    @abc.abstractmethod
    def versions(self) -> dict:
        """The framework's version by package name, for doctor's report: {"jax": "0.4.38"}."""

    @abc.abstractmethod
    def discover(self) -> dict:
        """What the framework sees here (`dashbench devices --json`); has the framework's version
        under `name`, and default_device, cpu, gpus and tpu."""

    @abc.abstractmethod
    def device_kinds(self) -> list[str]:
        """The device kinds the framework sees here: "cpu" always, then "gpu" or "tpu" where present."""

    @abc.abstractmethod
    def joins_cluster_first(self) -> bool:
        """True where this process is a host of a multi-host run that must join its peers before the
        framework may list a device: its device check is left to the run."""

    @abc.abstractmethod
    def require(self, spec: RunSpec) -> None:
        """Raise DeviceError (engine.target) when the gpu or tpu the spec asks for is not here, asking
        the framework only what a missing device fails on (engine/presence.py)."""

    # -- what the shared measuring code needs ---------------------------------------------------

    @abc.abstractmethod
    def matmul(self, kind: str, dtype: str, size: int) -> Callable[[], float]:
        """A function that multiplies two fixed size² matrices of `dtype` on this host's first device
        of `kind` and returns a scalar of the product on the host (engine/probe.py times it)."""

    @abc.abstractmethod
    def memory_meters(self) -> list:
        """Meters (engine/peak_memory.py) of the accelerators the framework, if this process already
        imported it, sees; [] on a CPU. Starts nothing."""

    @abc.abstractmethod
    def before_run(self, spec: RunSpec) -> None:
        """Work done in the run's process before its memory check: a backend that can compile one step
        there records its compiler's memory analysis for the guard (models/memory.py); others do nothing."""


def interface() -> list[str]:
    """The names every backend implements: the abstract methods and the class attributes above."""
    return sorted(Backend.__abstractmethods__ | {"name", "display_name", "no_tpu", "remote_tpu"})
