"""The TensorFlow backend: its measured loop (loop), its training to accuracy (accuracy), what it sees
and the tf.distribute strategy of a run (devices). TensorFlow is imported when a method is called."""

from __future__ import annotations

import sys

from dashbench.engine import frameworks, peak_memory
from dashbench.engine.base import Backend
from dashbench.engine.target import DeviceError
from dashbench.hardware import tpu


class TensorFlow(Backend):
    name = "tensorflow"
    display_name = "TensorFlow"
    no_tpu = (
        "tpu requested but this host shows no TPU (no /dev/accel0 or /dev/vfio/0, no TPU_ACCELERATOR_TYPE or TPU_NAME)"
    )
    remote_tpu = True  # --tpu NAME: a TPUClusterResolver finds it

    def run(self, spec, on_event=None):
        from dashbench.engine.tensorflow import loop

        return loop.run(spec, on_event)

    def run_to_accuracy(self, spec, on_event=None):
        from dashbench.engine.tensorflow import accuracy

        return accuracy.run(spec, on_event)

    def set_random_seed(self, seed: int) -> None:
        self.import_framework()
        import keras

        keras.utils.set_random_seed(seed)

    def import_framework(self):
        return frameworks.import_tensorflow()

    def versions(self) -> dict:
        return {"tensorflow": self.import_framework().__version__}

    def discover(self) -> dict:
        from dashbench.engine.tensorflow import devices

        return devices.discover()

    def device_kinds(self) -> list[str]:
        kinds = ["cpu"]
        tf = self.import_framework()
        with frameworks.native_stderr_silenced():
            if tf.config.list_physical_devices("GPU"):
                kinds.append("gpu")
        if tpu.evidence():
            kinds.append("tpu")
        return kinds

    def joins_cluster_first(self) -> bool:
        return False  # a multi-worker strategy is built by the run, after its devices are listed

    def require(self, spec) -> None:
        from dashbench.engine.tensorflow import devices

        tf = self.import_framework()
        if spec.device == "gpu":
            with frameworks.native_stderr_silenced():
                gpus = tf.config.list_physical_devices("GPU")
            if not gpus:
                raise DeviceError(f"gpu requested but TensorFlow sees no GPU; found: {devices.found_summary(tf)}")
            if spec.replicas is not None and spec.replicas > len(gpus):
                raise DeviceError(
                    f"{spec.replicas} GPUs requested but TensorFlow sees {len(gpus)}; "
                    f"found: {devices.found_summary(tf)}"
                )
        elif spec.tpu in (None, "local") and not tpu.evidence():
            raise DeviceError(f"{self.no_tpu}; found: {devices.found_summary(tf)}")

    def matmul(self, kind: str, dtype: str, size: int):
        tf = self.import_framework()
        name = {"cpu": "/cpu:0", "gpu": "/gpu:0", "tpu": "/tpu:0"}[kind]
        with tf.device(name):
            a = tf.random.stateless_normal([size, size], seed=[1, 2], dtype=dtype)
            b = tf.random.stateless_normal([size, size], seed=[3, 4], dtype=dtype)
        matmul = tf.function(lambda x, y: tf.matmul(x, y)[0, 0])

        def fetch():
            with tf.device(name):
                return float(matmul(a, b).numpy())

        return fetch

    def before_run(self, spec) -> None:
        """Nothing: the memory guard checks the parameter, slot and activation counts."""

    def memory_meters(self) -> list:
        tf = sys.modules.get("tensorflow")
        if tf is None:
            return []
        for kind in ("gpu", "tpu"):
            meters = peak_memory.tf_meters(tf, kind, None)
            if meters:
                capacity = peak_memory.device_capacity(kind)
                for meter in meters:
                    meter.capacity = capacity
                return meters
        return []


BACKEND = TensorFlow()
