"""A JAX run on the host's CPU compiles its one-step loop once: the memory guard's analysis before the run
(engine/jax/loop.before_run) compiles the run's own program, and the run's first call finds it compiled,
with the same losses as a run that compiles its loop itself, and that compile counted in its compile_s.
A loop of several steps is not the guard's one step: the analysis compiles one step, and keeps nothing for the run.

Keras picks its backend once per process, and this test process runs TensorFlow: the checks run in a
child process with Keras on JAX, at tiny shapes."""

import json
import os
import subprocess
import sys

from fixtures.xla import FAST_XLA_COMPILE

CHILD = """
import json, logging
import jax
from dashbench.engine import backends
backends.select("jax")
from dashbench.core.spec import RunSpec
from dashbench.engine.jax import loop

compiled = []  # the jitted functions XLA compiled, in order (jax_log_compiles)

class Compiles(logging.Handler):
    def emit(self, record):
        text = record.getMessage()
        if "XLA compilation of " in text:
            compiled.append(text.split("XLA compilation of ")[1].split(" ")[0])

logging.getLogger("jax").addHandler(Compiles())
logging.getLogger("jax").setLevel(logging.WARNING)
jax.config.update("jax_log_compiles", True)

def watched(spec, analysed=None):
    start = len(compiled)
    source = loop.before_run(analysed) if analysed else None
    prepared = loop._prepared.get("program")
    middle = len(compiled)
    result = loop.run(spec)
    return {"source": source, "before": compiled[start:middle], "during": compiled[middle:],
            "prepared_s": prepared.compile_s if prepared else None, "compile_s": result.compile_s,
            "losses": result.losses, "flops": result.flops_per_example, "left": bool(loop._prepared)}

tiny = dict(model="fashion_mnist_cnn", batch_size=8, image_size=16, width=4, steps=2, warmup=1,
            device="cpu", backend="jax")
one, two = RunSpec(**tiny), RunSpec(**tiny, steps_per_loop=2)
# "alone": the program compiled before it was another spec's (a label apart), so the run compiles its own.
out = {"one": watched(one, one), "alone": watched(one, RunSpec(**tiny, label="another"))}
start = len(compiled)  # two steps a host call: the analysis alone (the run's own loop is not the guard's step)
out["two"] = {"source": loop.before_run(two), "before": compiled[start:], "left": bool(loop._prepared)}
print("RESULT " + json.dumps(out))
"""


def test_a_cpu_run_compiles_its_step_once_and_measures_what_it_measured_before():
    env = {**os.environ, "XLA_FLAGS": f"{os.environ.get('XLA_FLAGS', '')} {FAST_XLA_COMPILE}".strip()}
    done = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=300, env=env)
    lines = [line for line in done.stdout.splitlines() if line.startswith("RESULT ")]
    assert done.returncode == 0 and lines, done.stderr[-3000:]
    out = json.loads(lines[-1][len("RESULT ") :])
    one, alone, two = out["one"], out["alone"], out["two"]

    # The guard's analysis compiled the run's loop, and the run compiled nothing of its step again.
    assert one["source"] == "xla"
    assert one["before"].count("jit(train_loop)") == 1 and "jit(step)" not in one["before"]
    assert not {"jit(train_loop)", "jit(step)"} & set(one["during"]), one["during"]
    # Its compile is in the run's compile_s, which is the first call's time on top of it.
    assert one["prepared_s"] > 0 and one["compile_s"] > one["prepared_s"]
    # The same run measured with its own compile (the program compiled before it was another spec's, and
    # was let go): the same model, the same losses, the same FLOPs.
    assert "jit(train_loop)" in alone["before"] and "jit(train_loop)" in alone["during"]
    assert not one["left"] and not alone["left"]
    assert one["losses"] == alone["losses"] and one["flops"] == alone["flops"]

    # Two steps a host call: the guard's analysis is still one step, and no program is kept for the run.
    assert two["source"] == "xla" and not two["left"]
    assert "jit(step)" in two["before"] and "jit(train_loop)" not in two["before"]
