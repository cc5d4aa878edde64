import pytest

from dashbench.core.spec import MODELS, RunSpec, SpecError, parse_batch_sizes


@pytest.mark.parametrize(
    "fields, field, allowed",
    [
        ({"model": "vgg", "batch_size": 8}, "model", "fashion_mnist_cnn"),
        ({"model": "conv2d", "batch_size": 0}, "batch_size", ">= 1"),
        ({"model": "conv2d", "batch_size": 7, "replicas": 2}, "batch_size", "multiple of 2 (e.g. 8)"),
        ({"model": "conv2d", "batch_size": 8, "precision": "fp8"}, "precision", "mixed_bfloat16"),
        ({"model": "conv2d", "batch_size": 8, "device": "npu"}, "device", "tpu"),
        ({"model": "conv2d", "batch_size": 8, "steps": 10, "steps_per_loop": 4}, "steps", "steps_per_loop"),
        ({"model": "resnet50", "batch_size": 8, "data": "real"}, "data", "fashion_mnist_cnn"),
        ({"model": "conv2d", "batch_size": 8, "colour": "red"}, "colour", "unknown field"),
        ({"model": "conv2d", "batch_size": "8"}, "batch_size", "integer"),
    ],
)
def test_bad_spec_names_field_and_allowed_values(fields, field, allowed):
    with pytest.raises(SpecError) as info:
        RunSpec.from_dict(fields)
    assert info.value.field == field
    assert str(info.value).startswith(f"{field}: ")
    assert allowed in str(info.value)
    assert "\n" not in str(info.value)


def test_round_trip_through_dict():
    spec = RunSpec(model="bilstm", batch_size=16, replicas=2, seq_len=12, label="quick")
    assert RunSpec.from_dict(spec.to_dict()) == spec


def test_every_model_accepts_synthetic_defaults():
    for model in MODELS:
        assert RunSpec(model=model, batch_size=4).data == "synthetic"


def test_sweep_batch_sizes_take_commas_spaces_or_semicolons_and_each_size_once():
    assert parse_batch_sizes("16, 8 8;32,") == [16, 8, 32]
    for text, bad in (("32, lots", "'lots'"), ("8,0", "0"), ("8,-4", "-4"), ("4.5", "'4.5'")):
        with pytest.raises(SpecError) as info:
            parse_batch_sizes(text)
        rule = "must be whole numbers >= 1 separated by commas, e.g. 32,64,128"
        assert str(info.value) == f"batch_sizes: {rule}; {bad} is not"
    with pytest.raises(SpecError, match="^batch_sizes: give at least one batch size"):
        parse_batch_sizes(" , ")


def test_an_empty_sweep_item_between_commas_is_a_typo_pointed_out():
    for text in ("32,,64", "32, ,64", "32;;64"):
        with pytest.raises(SpecError) as info:
            parse_batch_sizes(text)
        assert info.value.field == "batch_sizes"
        assert str(info.value).startswith(f"batch_sizes: empty item between commas in {text!r}: must be whole numbers")
    assert parse_batch_sizes("32, 64") == parse_batch_sizes("32 64,") == [32, 64]  # a space or a last comma is no item
