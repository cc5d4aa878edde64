"""The workloads' one home: each built-in's entry, refusals in one line, and a model file through the
same interface."""

import dataclasses

import pytest

from dashbench.core.spec import BUILTINS, MODELS, REAL_DATA_MODELS, RunSpec, SpecError
from dashbench.workloads import memory_counts, memory_estimate, presets, registry

SHA = "3fa9c2d1e0b4" + "0" * 52
FILE = "mlp.py:build@" + SHA[:12]


def test_the_registry_lists_core_s_built_ins_in_order_each_with_its_facts():
    assert registry.names() == MODELS == tuple(BUILTINS)
    for workload in registry.builtins():
        assert workload.capabilities is BUILTINS[workload.name]
        assert workload.memory is not None and not workload.is_file
        assert (workload.flops is None) == (workload.flops_by == "layers")
    assert [w.name for w in registry.builtins() if w.capabilities.real_data] == list(REAL_DATA_MODELS)
    assert registry.get("llama").flops_by == "formula" and registry.get("llama").profile_by_layers
    assert not registry.get("resnet50").profile_by_layers and registry.get("resnet50").optimizer_slots == 1


def test_register_refuses_a_name_twice_and_one_core_does_not_declare():
    conv = registry.get("conv2d")
    with pytest.raises(ValueError, match="^workload 'conv2d' is already registered$"):
        registry.register(conv)
    with pytest.raises(ValueError, match="not a built-in of core.spec.BUILTINS"):
        registry.register(dataclasses.replace(conv, name="vgg"))
    assert registry.names() == MODELS  # nothing added by a refusal


def test_get_refuses_an_unknown_name_listing_the_known_ones():
    with pytest.raises(SpecError) as refused:
        registry.get("vgg")
    message = str(refused.value)
    assert message.startswith("model: unknown model 'vgg'; choose one of: conv2d, fashion_mnist_cnn,")
    assert "\n" not in message and all(name in message for name in MODELS)
    assert registry.builtin("vgg") is None and registry.builtin(None) is None
    assert registry.builtin("bilstm") is registry.get("bilstm")


def test_each_workload_lists_the_presets_that_name_it():
    assert [p.slug for p in registry.get("resnet50").presets] == ["riseml-resnet50"]
    assert registry.get("llama").presets == ()
    assert list(presets.PRESETS) == [p.slug for w in registry.builtins() for p in w.presets]


def test_the_memory_count_is_the_entry_s_at_the_run_s_shapes():
    spec = RunSpec(model="bilstm", batch_size=4, seq_len=16, width=32)
    workload = registry.get("bilstm")
    assert memory_estimate.counts(spec) == memory_counts.bilstm(workload.shapes(spec))
    assert memory_estimate.estimate(spec.replace(backend="jax")).fixed < memory_estimate.estimate(spec).fixed


def test_a_model_file_has_the_same_interface(monkeypatch):
    monkeypatch.setattr(memory_counts, "USER_MODEL_FACTS", {})
    unknown = registry.get(FILE)
    assert unknown.is_file and unknown.name == FILE and unknown.flops_by == "compiler"
    assert unknown.unit == "examples" and unknown.overrides == () and unknown.presets == ()
    assert unknown.memory is None  # not built in this process: no estimate here
    spec = RunSpec(model=FILE, batch_size=8, model_path="/models/mlp.py", model_sha256=SHA)
    assert not memory_estimate.estimable(spec)
    memory_counts.know(FILE, {"parameters": 10, "activations": 20, "inputs": 3, "slots": 1})
    known = registry.for_file(FILE)
    assert known.memory(None) == (10.0, 20.0, 4.0) and known.optimizer_slots == 1
    assert memory_estimate.estimable(spec) and memory_estimate.estimate(spec).params == 10
