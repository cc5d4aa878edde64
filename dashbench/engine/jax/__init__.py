"""The JAX backend (Keras on JAX): its measured loop (loop), its training to accuracy (accuracy), what
it sees and the devices of a run (devices), its seeding (seed). JAX is imported when a method is called."""

from __future__ import annotations

import sys

from dashbench.core.spec import SpecError
from dashbench.engine import frameworks, peak_memory
from dashbench.engine.base import Backend
from dashbench.engine.target import DeviceError


class Jax(Backend):
    name = "jax"
    display_name = "JAX"
    no_tpu = "tpu requested but JAX sees no TPU"

    def run(self, spec, on_event=None):
        from dashbench.engine.jax import loop

        return loop.run(spec, on_event)

    def run_to_accuracy(self, spec, on_event=None):
        from dashbench.engine.jax import accuracy

        return accuracy.run(spec, on_event)

    def step_profile(self, spec):
        """One training step's cost with no device and no weights (engine/jax/profile.py)."""
        from dashbench.engine.jax import profile

        return profile.step_profile(spec)

    def set_random_seed(self, seed: int) -> None:
        from dashbench.engine.jax import seed as jax_seed

        jax_seed.set_random_seed(seed)

    def import_framework(self):
        return frameworks.import_jax()

    def versions(self) -> dict:
        return {"jax": self.import_framework().__version__}

    def discover(self) -> dict:
        from dashbench.engine.jax import devices

        return devices.discover()

    def device_kinds(self) -> list[str]:
        kinds = ["cpu"]
        jax = self.import_framework()
        for kind in ("gpu", "tpu"):
            try:
                if jax.devices(kind):
                    kinds.append(kind)
            except RuntimeError:
                pass
        return kinds

    def joins_cluster_first(self) -> bool:
        from dashbench.engine.jax import devices

        return devices.distributed_settings() is not None  # jax.distributed.initialize comes first

    def require(self, spec) -> None:
        from dashbench.engine.jax import devices as jax_devices

        if jax_devices.distributed_settings() is not None:
            return  # jax.distributed.initialize must come before JAX lists any device
        jax_devices.prepare(spec)
        jax = self.import_framework()
        try:
            with frameworks.native_stderr_silenced():
                found = jax.devices(spec.device)
        except RuntimeError:  # "Unknown backend: 'tpu' requested, but no platforms ..."
            found = []
        kind = spec.device
        if not found:
            raise DeviceError(
                f"{kind} requested but JAX sees no {kind.upper()}; found: {jax_devices.found_summary(jax)}"
            )
        if kind == "gpu" and spec.replicas is not None and spec.replicas > len(found):
            raise SpecError("replicas", f"{spec.replicas} gpu devices requested but JAX sees {len(found)}")

    def matmul(self, kind: str, dtype: str, size: int):
        jax = self.import_framework()
        import jax.numpy as jnp

        device = jax.local_devices(backend=kind)[0]  # this host's own: devices(kind)[0] is host 0's
        a = jax.device_put(jax.random.normal(jax.random.key(1), (size, size), dtype=dtype), device)
        b = jax.device_put(jax.random.normal(jax.random.key(2), (size, size), dtype=dtype), device)
        matmul = jax.jit(lambda x, y: jnp.matmul(x, y)[0, 0])

        def fetch():
            return float(matmul(a, b))

        return fetch

    def before_run(self, spec) -> None:
        from dashbench.engine.jax import loop

        loop.before_run(spec)

    def memory_meters(self) -> list:
        jax = sys.modules.get("jax")
        if jax is None:
            return []
        try:
            return peak_memory.jax_meters(jax.local_devices())
        except Exception:
            return []


BACKEND = Jax()
