"""Every backend the spec allows has an implementation of the whole backend interface
(engine/base.py), found by its name in the registry (engine/backends.py), and looking one up starts
no framework: the shared code (presence, driverless, the doctor, `devices`) asks it before a run."""

import inspect
import json
import subprocess
import sys
from pathlib import Path

import pytest

from dashbench.core.spec import BACKENDS, SpecError
from dashbench.engine import backends, base

ROOT = Path(__file__).resolve().parents[2]


def test_the_registry_names_exactly_the_backends_the_spec_allows():
    assert set(backends.IMPLEMENTATIONS) == set(BACKENDS)


@pytest.mark.parametrize("name", BACKENDS)
def test_each_backend_implements_the_whole_interface(name):
    backend = backends.get(name)
    assert isinstance(backend, base.Backend)
    assert backend.name == name
    assert backend.display_name and backend.no_tpu.startswith("tpu requested but ")
    assert isinstance(backend.remote_tpu, bool)
    cls = type(backend)
    assert not cls.__abstractmethods__
    for method in base.Backend.__abstractmethods__:
        own = getattr(cls, method)
        assert own is not getattr(base.Backend, method), f"{name} does not implement {method}"
        expected = list(inspect.signature(getattr(base.Backend, method)).parameters)
        assert list(inspect.signature(own).parameters) == expected, f"{name}.{method} takes other arguments"
    assert set(base.interface()) <= set(dir(backend))
    # The folder is the backend: its package holds the implementation.
    assert cls.__module__ == backends.IMPLEMENTATIONS[name]
    assert (ROOT / "dashbench" / "engine" / name / "__init__.py").exists()


def test_an_unknown_backend_is_refused_naming_the_field_and_the_choices():
    with pytest.raises(SpecError) as caught:
        backends.get("torch")
    assert caught.value.field == "backend"
    assert "'torch'" in str(caught.value) and all(name in str(caught.value) for name in BACKENDS)


def test_looking_backends_up_imports_no_framework():
    """In a fresh interpreter: every backend found, its names read, its memory meters asked for (none
    where its framework is not imported yet), and still no TensorFlow, Keras or JAX loaded."""
    script = (
        "import json, sys\n"
        "from dashbench.engine import backends\n"
        "seen = {n: [backends.get(n).display_name, backends.get(n).memory_meters()] for n in backends.IMPLEMENTATIONS}\n"
        "print(json.dumps([seen, sorted(m for m in sys.modules if m.split('.')[0] in ('tensorflow', 'keras', 'jax'))]))\n"
    )
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    seen, loaded = json.loads(proc.stdout.strip().splitlines()[-1])
    assert seen == {"tensorflow": ["TensorFlow", []], "jax": ["JAX", []]}
    assert loaded == []
