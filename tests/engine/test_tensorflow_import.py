"""TensorFlow's import without JAX (engine/frameworks.py `import_tensorflow`): TensorFlow imports JAX
wherever it is installed, for TF Lite's optional converter; a TensorFlow run must not pay for it, and
JAX must stay importable after it (a user's model file, the doctor)."""

import json
import subprocess
import sys

import pytest
from fixtures.child_env import child_env

from dashbench.engine import frameworks

TINY_TF_RUN = (
    "['run', '--backend', 'tensorflow', '--model', 'conv2d', '--batch-size', '2', '--image-size', '8', "
    "'--width', '2', '--steps', '2', '--warmup', '1', '--device', 'cpu', '--no-store', '--json']"
)


def test_a_tensorflow_run_imports_no_jax_and_jax_imports_after_it():
    code = (
        "import json, sys\n"
        "from dashbench.cli import main\n"
        f"status = main({TINY_TF_RUN})\n"
        "loaded = sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.'))\n"
        "import jax.numpy as jnp\n"
        "print('CHECK ' + json.dumps({'status': status, 'jax_during_run': loaded,"
        " 'jax_after': float(jnp.ones(3).sum()), 'tf': 'tensorflow' in sys.modules}), file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, env=child_env())
    lines = [line for line in done.stderr.splitlines() if line.startswith("CHECK ")]
    assert done.returncode == 0 and lines, done.stderr[-2000:]
    check = json.loads(lines[-1][len("CHECK ") :])
    assert check == {"status": 0, "jax_during_run": [], "jax_after": 3.0, "tf": True}
    result = json.loads(done.stdout)
    assert result["status"] == "done" and result["backend"] == "tensorflow"


def test_hiding_jax_leaves_an_imported_jax_alone_and_an_unimported_one_importable(monkeypatch):
    import jax

    with frameworks._jax_hidden():
        assert sys.modules["jax"] is jax
    assert sys.modules["jax"] is jax

    monkeypatch.delitem(sys.modules, "jax")  # as in a process that has not imported it (restored after)
    with frameworks._jax_hidden():
        with pytest.raises(ImportError):
            import jax  # noqa: F811, F401
    assert "jax" not in sys.modules
