"""The Llama-style LM workload: its full size is Llama 3.1 8B's, its text is learnable and the same
everywhere, bad shapes are one line, and its quick try trains on JAX with tokens/s, MFU and both FLOP
counts (tests/workloads/test_workloads.py trains it on TensorFlow with the other workloads)."""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
from fixtures.xla import FAST_XLA_COMPILE

from dashbench.core import stats
from dashbench.core.spec import RunSpec, SpecError
from dashbench.workloads import catalog, lm_shape, lm_text

QUICK = [
    "--model",
    "llama",
    "--device",
    "cpu",
    "--seq-len",
    "64",
    "--width",
    "64",
    "--layers",
    "2",
    "--batch-size",
    "8",
    "--steps",
    "4",
]


def test_the_full_size_is_llama_3_1_8b_and_palm_counts_its_flops():
    shapes = catalog.check_spec(RunSpec(model="llama", batch_size=1))
    d = lm_shape.dims(shapes.width, shapes.layers, shapes.seq_len)
    assert (d.layers, d.width, d.heads, d.kv_heads, d.head_dim, d.mlp, d.vocab) == (32, 4096, 32, 8, 128, 14336, 128256)
    assert d.parameters == pytest.approx(8.03e9, rel=1e-3)
    # PaLM's 6N + 12·L·H·Q·T at T = 8192: 61.1 GFLOP a token.
    assert d.palm_flops()["training"] == pytest.approx(61.1e9, rel=2e-3)
    quick = lm_shape.dims(64, 2, 64)
    assert (quick.heads, quick.kv_heads, quick.head_dim, quick.mlp, quick.vocab) == (8, 2, 8, 224, 2048)


def test_the_text_follows_one_teacher_on_every_call():
    from dashbench.engine.workloads import llama

    shapes = catalog.check_spec(RunSpec(model="llama", batch_size=4, seq_len=32, width=64, layers=2))
    x, y = llama.llama_batch(shapes, 4, seed=3)
    again, _ = llama.llama_batch(shapes, 4, seed=3)
    other, _ = llama.llama_batch(shapes, 4, seed=4)
    assert x.shape == y.shape == (4, 32) and x.dtype == np.int32
    assert (x == again).all() and not (x == other).all()
    assert (y[:, :-1] == x[:, 1:]).all()  # the targets are the next tokens
    successors = np.random.default_rng(lm_text.TEACHER_SEED).integers(
        0, shapes.vocab, (shapes.vocab, lm_text.SUCCESSORS)
    )
    assert all(y[b, t] in successors[x[b, t]] for b in range(4) for t in range(32))


def test_a_block_states_the_output_its_call_computes():
    """The functional model takes a block's output from its compute_output_shape, not by tracing it."""
    import keras

    from dashbench.engine.workloads import llama

    d = llama.dims_of(catalog.check_spec(RunSpec(model="llama", batch_size=2, seq_len=16, width=64, layers=1)))
    previous = keras.mixed_precision.global_policy()
    for policy, dtype in (("float32", "float32"), ("mixed_bfloat16", "bfloat16")):
        keras.mixed_precision.set_global_policy(policy)
        try:
            block, calls = llama._block(d, llama._rope_tables(d), 0), []
            traced = block.call
            block.call = lambda x, calls=calls, traced=traced: calls.append(x) or traced(x)
            stated = block(keras.KerasTensor((None, d.seq_len, d.width), dtype=block.compute_dtype))
            assert not calls  # stated, not traced
            computed = block(keras.ops.ones((2, d.seq_len, d.width), dtype=block.compute_dtype))
        finally:
            keras.mixed_precision.set_global_policy(previous)
        assert stated.shape == (None, *computed.shape[1:]) and stated.dtype == computed.dtype == dtype


def test_a_layers_override_off_full_width_and_length_is_refused_as_one_line():
    with pytest.raises(SpecError, match="^layers: 2 layers need --width or --seq-len off full size"):
        catalog.check_spec(RunSpec(model="llama", batch_size=1, layers=2))
    with pytest.raises(SpecError, match="^width: a llama width: below 1024 it is a multiple of 16"):
        catalog.check_spec(RunSpec(model="llama", batch_size=1, width=100, layers=2))
    with pytest.raises(SpecError, match="^layers: conv2d has no layers override"):
        catalog.check_spec(RunSpec(model="conv2d", batch_size=1, layers=2))
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "dashbench",
            "run",
            "--model",
            "llama",
            "--batch-size",
            "1",
            "--layers",
            "2",
            "--no-store",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 2 and done.stderr.strip().splitlines()[-1].startswith("error: layers: 2 layers need"), (
        done.stderr
    )


def test_the_quick_try_trains_on_jax_with_tokens_per_second_and_both_flop_counts():
    env = {k: v for k, v in os.environ.items() if k not in ("KERAS_BACKEND", "XLA_FLAGS", "JAX_PLATFORMS")}
    env.update({"DASHBENCH_CPU_PROBE_SIZE": "512", "XLA_FLAGS": FAST_XLA_COMPILE})
    done = subprocess.run(
        [sys.executable, "-m", "dashbench", "run", "--backend", "jax", "--no-store", "--json", *QUICK],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout)
    losses = result["losses"]
    assert result["unit"] == "tokens" and len(losses) == 6 and all(np.isfinite(losses))
    assert not stats.loss_not_falling(losses) and losses[-1] < losses[0] < np.log(2048) + 0.5, losses
    # Tokens, not sequences: 8 sequences of 64 tokens a step.
    assert result["examples_per_sec"] == pytest.approx(8 * 64 / result["step_time_median_s"], rel=0.6)
    d = lm_shape.dims(64, 2, 64)
    assert result["flops_source"] == "analytic"
    assert result["flops_per_example"] == result["analytic_flops_per_example"] == d.palm_flops()["training"]
    # XLA's count of one step: below PaLM's at this shape, whose 6N counts the embedding's lookup as
    # a matmul (a third of N here), and far above a count that saw only part of the step.
    assert 0.5 < result["compiler_flops_per_example"] / result["flops_per_example"] < 1.0
    assert result["mfu"] > 0 and result["achieved_tflops"] > 0


def test_a_quick_llama_run_is_labelled_quick_and_the_forms_quick_try_is_its_recipe():
    from dashbench.views.common.format import run_label
    from dashbench.views.run import form as run_form

    # The store keeps width and seq_len, not layers: the label shows what it keeps (a layers
    # dimension read from the defaults would say 32, not the run's 2).
    label = run_label({"model": "llama", "accelerator": "CPU", "batch_size": 8, "seq_len": 64, "width": 64})
    assert "quick len64 w64" in label and "L" not in label.split("quick")[1]
    state = run_form.run_form_defaults(["cpu"]) | {"run_quick": True, "run_model": "llama"}
    state |= run_form.quick_toggle_values(state)
    (spec,), _ = run_form.specs_from_form(state | {"run_batch_size": 8})
    assert (spec.seq_len, spec.width, spec.layers) == (64, 64, 2)


def test_an_einsums_flops_come_from_its_equation_and_shapes():
    from dashbench.engine.compiler_flops import einsum_count

    assert einsum_count("BTNH,BSNH->BNTS", [[8, 64, 8, 8], [8, 64, 8, 8]]) == 2 * 8 * 64 * 8 * 8 * 64
    assert einsum_count("BNTS,BTNH->BSNH", [[8, 8, 64, 64], [8, 64, 8, 8]]) == 2 * 8 * 8 * 64 * 64 * 8  # a gradient
    assert einsum_count("...ij,jk->...ik", [[5, 2, 3], [3, 4]]) == 2 * 5 * 2 * 3 * 4
    assert einsum_count("ij->i", [[2, 3]]) == 6 and einsum_count("ij->ji", [[2, 3]]) == 0
    assert einsum_count("ij,jk,kl->il", [[2, 3], [3, 4], [4, 5]]) is None
