"""The install lists (requirements*.txt) agree with each other and with pyproject.toml: one TensorFlow
release on every device class, one Keras, one protobuf, one jax, and exact pins the ranges admit."""

import re
from pathlib import Path

import tomllib
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

ROOT = Path(__file__).resolve().parents[2]
FILES = sorted(p.name for p in ROOT.glob("requirements*.txt"))
TENSORFLOW = {"tensorflow", "tensorflow-tpu", "tensorflow-cpu"}


def requirements(name: str) -> list[Requirement]:
    """The file's requirements, its -r includes' first (pip reads them in place)."""
    found = []
    for line in (ROOT / name).read_text().splitlines():
        line = line.split(" #")[0].strip()
        if line.startswith("-r"):
            found += requirements(line[2:].strip())
        elif line and not line.startswith(("#", "-")):
            found.append(Requirement(line))
    return found


def pins(name: str) -> dict[str, str]:
    """Distribution name -> pinned version; every requirement is an exact pin, named once."""
    pinned = {}
    for req in requirements(name):
        (spec,) = req.specifier  # one specifier, and it is ==
        assert spec.operator == "==", f"{name}: {req} is not an exact pin"
        key = canonicalize_name(req.name)
        assert key not in pinned, f"{name}: {key} named twice (counting -r includes)"
        pinned[key] = spec.version
    return pinned


ALL = {name: pins(name) for name in FILES}
WITH_TF = {name: p for name, p in ALL.items() if TENSORFLOW & p.keys()}
WITH_JAX = {name: p for name, p in ALL.items() if "jax" in p}


def test_every_device_class_has_a_list():
    assert {"requirements.txt", "requirements-gpu.txt", "requirements-tpu.txt"} <= WITH_TF.keys()
    assert {"requirements.txt", "requirements-gpu-jax.txt", "requirements-tpu-jax.txt"} <= WITH_JAX.keys()
    assert "requirements-app.txt" in ALL and not (TENSORFLOW | {"jax"}) & ALL["requirements-app.txt"].keys()


def test_every_list_names_one_tensorflow_release():
    versions = {name: {p[d] for d in TENSORFLOW & p.keys()} for name, p in WITH_TF.items()}
    assert all(len(v) == 1 for v in versions.values()), versions
    assert len(set().union(*versions.values())) == 1, f"different TensorFlow releases: {versions}"
    builds = {name: sorted(TENSORFLOW & p.keys()) for name, p in WITH_TF.items()}
    assert builds["requirements-tpu.txt"] == ["tensorflow-tpu"] and builds["requirements.txt"] == ["tensorflow"]


def test_the_tensorflow_lists_name_the_same_keras_and_protobuf():
    for package in ("keras", "protobuf"):
        named = {name: p.get(package) for name, p in WITH_TF.items()}
        assert None not in named.values() and len(set(named.values())) == 1, f"{package}: {named}"
        # The JAX lists too: one Keras (and one dashboard stack) whichever backend runs it.
        elsewhere = {name: p[package] for name, p in ALL.items() if package in p}
        assert set(elsewhere.values()) == set(named.values()), f"{package}: {elsewhere}"


def test_the_jax_lists_name_one_jax_release():
    versions = {name: p["jax"] for name, p in WITH_JAX.items()}
    assert len(set(versions.values())) == 1, f"different jax releases: {versions}"
    for name, p in WITH_JAX.items():
        assert p.get("jaxlib", p["jax"]) == p["jax"], f"{name}: jaxlib {p['jaxlib']} beside jax {p['jax']}"
    extras = {name: set(r.extras) for name in WITH_JAX for r in requirements(name) if r.name == "jax"}
    assert extras["requirements.txt"] == set() and "tpu" in extras["requirements-tpu-jax.txt"]
    assert "cuda12" in extras["requirements-gpu-jax.txt"]


def test_tensorflow_and_jax_never_share_an_accelerator_venv():
    # One process holds a TPU; a TensorFlow venv with jax[tpu] (or the reverse) would fight over it.
    both = WITH_TF.keys() & WITH_JAX.keys()
    assert both == {"requirements.txt", "requirements-dev.txt"}, f"TensorFlow and JAX share {both}"  # CPU only
    for name in ("requirements-tpu.txt", "requirements-tpu-jax.txt"):
        assert "--find-links https://storage.googleapis.com/" in (ROOT / name).read_text()


def test_pyproject_ranges_admit_the_pins():
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    extras = project["optional-dependencies"]
    groups = {
        "requirements-app.txt": project["dependencies"],
        "requirements.txt": extras["cpu"],
        "requirements-gpu.txt": extras["gpu"],
        "requirements-gpu-jax.txt": extras["gpu-jax"],
    }
    for name, group in groups.items():
        for req in map(Requirement, group):
            pinned = ALL[name].get(canonicalize_name(req.name))
            assert pinned is not None, f"pyproject names {req.name}, {name} does not pin it"
            assert req.specifier.contains(pinned), f"pyproject's {req} rejects {name}'s {req.name}=={pinned}"
    # And no list pins something a range anywhere in pyproject rejects.
    ranges = [Requirement(r) for r in project["dependencies"] + sum(extras.values(), [])]
    for name, p in ALL.items():
        for req in ranges:
            key = canonicalize_name(req.name)
            assert key not in p or req.specifier.contains(p[key]), f"{name}: {key}=={p[key]} outside {req}"


def test_the_install_page_names_the_pinned_tensorflow_and_every_list():
    section = (ROOT / "docs" / "install.md").read_text()
    (release,) = {p[d] for p in WITH_TF.values() for d in TENSORFLOW & p.keys()}
    assert re.search(rf"TensorFlow[^.]*\b{re.escape(release)}\b", section), release
    missing = [name for name in FILES if name != "requirements-dev.txt" and name not in section]
    assert not missing, f"install lists missing from docs/install.md: {missing}"
