"""What the backends' device modules (tensorflow/devices, jax/devices) and the matmul probe share,
kept below them all so that none of them imports another for it: the quiet framework importers,
and the CPU probe's size.

TensorFlow and JAX are imported inside functions, after their logging is turned down: the GPU builds
print a cuInit error (and JAX's CUDA plugin complains) on a machine without a GPU, harmless but
alarming. No framework is imported when this module is.
"""

from __future__ import annotations

import contextlib
import os
import sys
import tempfile

# Side of the square probe matrices; 4096 reaches the attainable rate where 1024 does not.
CPU_PROBE_SIZE = int(os.environ.get("DASHBENCH_CPU_PROBE_SIZE", "4096"))
CPU_PROBE_REPEATS = 3


def import_tensorflow():
    """Import TensorFlow with its C++ and Python logging turned down to errors that matter."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")
    os.environ.setdefault("KERAS_BACKEND", "tensorflow")
    if "tensorflow" in sys.modules:
        return sys.modules["tensorflow"]
    with native_stderr_silenced(), _jax_hidden():
        import tensorflow as tf
    tf.get_logger().setLevel("ERROR")
    import absl.logging

    absl.logging.set_verbosity(absl.logging.ERROR)
    return tf


@contextlib.contextmanager
def _jax_hidden():
    """JAX made unimportable for the duration, where it is not imported yet.

    TensorFlow's import imports JAX wherever it is installed, for TF Lite's optional JAX converter
    (`tensorflow.lite.python.util`, in a try/except ImportError), which nothing here uses, and every
    TensorFlow run and device listing paid for it. Hidden for that import only, so a later `import jax`
    (a user's model file, the doctor, a test) imports the real one.
    """
    if "jax" in sys.modules:
        yield
        return
    sys.modules["jax"] = None  # the import system's "not importable" entry
    try:
        yield
    finally:
        if sys.modules.get("jax", False) is None:  # still our entry, not a JAX imported meanwhile
            del sys.modules["jax"]


def import_jax():
    """Import JAX with its C++ logging turned down (the CUDA plugin complains on a machine without a GPU)."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    if "jax" in sys.modules:
        return sys.modules["jax"]
    with native_stderr_silenced():
        import jax
    return jax


# Descriptor 2 as it was before each silencing below, innermost last: a line the user must see even
# while a compile is silenced (the run guard's last words before it ends the process) goes there.
_saved_stderr: list[int] = []


def user_stderr_fd() -> int:
    """The descriptor that reaches the user's stderr now, silenced or not."""
    return _saved_stderr[0] if _saved_stderr else 2


@contextlib.contextmanager
def native_stderr_silenced():
    """Send what C++ libraries write to file descriptor 2 to a scratch file for the duration.

    Python exceptions are objects, not text, so real errors still reach the caller.
    """
    try:
        sys.stderr.flush()
        saved = os.dup(2)
    except (OSError, ValueError):
        yield
        return
    _saved_stderr.append(saved)
    with tempfile.TemporaryFile() as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield
        finally:
            os.dup2(saved, 2)
            _saved_stderr.remove(saved)
            os.close(saved)
