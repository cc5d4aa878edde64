"""A user's model as a workload: a builder function (`file.py:build`) or a saved Keras 3 model
(`model.keras`, loaded with safe_mode=True), on either backend.

The builder contract, as small as torchbench's `get_module()`:
- `def build()` returns a `keras.Model` whose inputs have fixed shapes, batch aside. dashbench makes
  the inputs from the input shapes and dtypes, a learnable target from the output shape (class labels
  or a regression target from a fixed random projection of the inputs), and trains it with the
  model's compiled loss and optimizer if it has them, else Adam 1e-3 and the synthetic task's loss.
- It may take `batch_size` (the run's global batch) and `classes` (an image folder's class count).
- It may return a dict instead: {"model": m} plus any of "inputs" ({input name: {"low", "high"}} for
  integer inputs: token ids; {"shape", "dtype"} for a subclassed model, which has no symbolic inputs),
  "labels" (a function of the numpy inputs giving the targets), "loss" (a Keras loss or its name, or
  one per output with the others None) and "optimizer" (a Keras optimizer or its name).

The file is imported only in the run's own process, under a time limit (user_import).
"""

from __future__ import annotations

import inspect
import os
from pathlib import Path
from typing import Optional

from dashbench.core.errors import one_line
from dashbench.core.spec import SpecError
from dashbench.engine.workloads import user_abstract
from dashbench.engine.workloads import user_graph as graph
from dashbench.engine.workloads.base import KerasWorkload
from dashbench.engine.workloads.user_import import import_file, say, user_code
from dashbench.workloads import lm_text, model_file
from dashbench.workloads.registry import Shapes

RETURNED_KEYS = ("model", "inputs", "labels", "loss", "optimizer")
BUILDER_ARGUMENTS = ("batch_size", "classes")
FEATURE_GROUPS = 64  # the teacher reads each input as this many means of contiguous chunks

_workloads: dict = {}


def workload(spec) -> "UserWorkload":
    """The run's workload object for its model file, one per file, hash and builder in a process."""
    key = (spec.model_path, spec.model_sha256, model_file.builder_of(spec.model))
    if key not in _workloads:
        _workloads[key] = UserWorkload(spec)
    return _workloads[key]


class UserWorkload(KerasWorkload):
    def __init__(self, spec):
        self.path, self.sha = model_file.local_path(spec), spec.model_sha256
        self.builder = model_file.builder_of(spec.model)
        self.where = f"{self.path.name}:{self.builder}" if self.builder else self.path.name
        self.batch_size = spec.batch_size
        self.classes: Optional[int] = None
        self.extras: dict = {}
        self.meta: Optional[dict] = None
        self.kind, self.output_index, self.token_input = "regression", 0, None  # set by _describe
        super().__init__(spec.model, self._build_checked, self._synthetic)

    # -- the model ----------------------------------------------------------------------------

    def build_model(self, shapes: Shapes):
        return self._build_checked(shapes)

    def _build_checked(self, shapes: Shapes):
        if shapes.classes:
            self.classes = shapes.classes
        model = self._load()
        if self.meta is None:
            self.meta = self._describe(model)
        return model

    def _load(self):
        import keras

        if self.builder is None:
            return self._load_saved(keras)
        function = getattr(import_file(self.path, self.sha), self.builder, None)
        if not callable(function):
            raise say(f"{self.path.name} has no function {self.builder}()")
        try:
            parameters = inspect.signature(function).parameters
        except (TypeError, ValueError):
            parameters = {}
        given = {"batch_size": self.batch_size, "classes": self.classes}
        kwargs = {}
        for name, parameter in parameters.items():
            if name in BUILDER_ARGUMENTS and (given[name] is not None or parameter.default is inspect.Parameter.empty):
                if given[name] is None:
                    raise say(
                        f"{self.where}() asks for {name}, which this run has none of (classes: an image "
                        f"folder's class count); give it a default"
                    )
                kwargs[name] = given[name]
            elif parameter.default is inspect.Parameter.empty and parameter.kind not in (
                inspect.Parameter.VAR_POSITIONAL,
                inspect.Parameter.VAR_KEYWORD,
            ):
                raise say(
                    f"{self.where}() asks for {name!r}; a builder takes no arguments, or any of "
                    f"{', '.join(BUILDER_ARGUMENTS)}"
                )
        with user_code(f"{self.where}()", "return"):
            try:
                out = function(**kwargs)
            except Exception as exc:
                raise say(f"{self.where}() raised {one_line(exc, typed=True)}") from None
        if isinstance(out, dict):
            unknown = [key for key in out if key not in RETURNED_KEYS]
            if unknown:
                raise say(
                    f"{self.where}() returned a dict with {unknown[0]!r}; its keys are {', '.join(RETURNED_KEYS)}"
                )
            self.extras, out = {k: v for k, v in out.items() if k != "model"}, out.get("model")
        if not isinstance(out, keras.Model):
            raise say(f"{self.where}() returned {type(out).__name__}, not a keras.Model (or a dict with 'model')")
        self._take_compiled(out)
        wanted = graph.check_inputs(self.where, self.extras.get("inputs") or {})
        if graph.has_symbolic_inputs(out):
            return out
        with user_code(f"{self.where}()'s model (its call())", "return"):
            return graph.symbolic(out, self.where, wanted)

    def _load_saved(self, keras):
        from dashbench.hardware import host
        from dashbench.workloads import keras_archive

        keras_archive.check(self.path, host.host_capacity())  # the sizes before Keras parses anything
        try:
            loaded = keras.saving.load_model(str(self.path), safe_mode=True)
        except Exception as exc:
            text = str(exc)
            missing = _unregistered_classes(keras, self.path) if "Could not locate class" in text else []
            if missing:
                raise say(
                    f"{self.path.name} uses custom class{'es' if len(missing) > 1 else ''} "
                    f"{', '.join(missing)}, which no code here defines (a .keras file holds no code): give "
                    f"a builder file.py:build that defines {'them' if len(missing) > 1 else 'it'} (registered "
                    f"with keras.saving.register_keras_serializable) and returns the model"
                ) from None
            if "Lambda" in text or "safe_mode" in text:
                raise say(
                    f"{self.path.name} holds a Lambda layer (Python code), which safe mode refuses: save "
                    f"the model without Lambda layers, or give a builder file.py:build"
                ) from None
            raise say(f"{self.path.name} is not a loadable Keras 3 model: {one_line(exc, typed=True)}") from None
        if not isinstance(loaded, keras.Model):
            raise say(f"{self.path.name} holds {type(loaded).__name__}, not a keras.Model")
        # Fresh weights from the run's seed, as a builder's: the file gives the architecture.
        fresh = keras.models.clone_model(loaded)
        self._take_compiled(loaded)
        return fresh

    def _take_compiled(self, model) -> None:
        """A compiled model's loss and optimizer are the run's (unless the builder returned its own)."""
        if getattr(model, "compiled", False):
            if getattr(model, "optimizer", None) is not None:
                self.extras.setdefault("optimizer", model.optimizer)
            if getattr(model, "loss", None) is not None:
                self.extras.setdefault("loss", model.loss)

    def _describe(self, model) -> dict:
        """The inputs' and outputs' shapes and how each input is made; bad ones named."""
        wanted = graph.check_inputs(self.where, self.extras.get("inputs") or {})
        inputs = [self._input(model, tensor, wanted.get(graph.name_of(tensor)) or {}) for tensor in model.inputs]
        if not model.outputs:
            raise say(f"{self.where}: the model has no outputs")
        self.output_index, loss = graph.trained_output(model, self.where, self.extras.get("loss"))
        if self.output_index is None and "labels" not in self.extras:
            raise say(f"{self.where}: the model has {len(model.outputs)} outputs; return 'labels' and 'loss' for them")
        outputs = [{"name": graph.name_of(t), "shape": list(t.shape[1:]), "dtype": str(t.dtype)} for t in model.outputs]
        trained = outputs[self.output_index or 0]
        if any(d is None for d in trained["shape"]):
            raise say(
                f"output {trained['name']!r} has shape {graph.shape_text(trained['shape'])}: its dimensions "
                f"must be fixed for a target to be made"
            )
        return {"inputs": inputs, "outputs": outputs, **self._task(model, trained, loss, inputs)}

    def _input(self, model, tensor, bounds: dict) -> dict:
        """How one input is made: floats from a normal, or whole numbers in [low, high) where it is an
        integer input, or a one-dimensional float input feeding an Embedding (token ids, as keras.io's
        `layers.Input(shape=(maxlen,))` before a TokenAndPositionEmbedding)."""
        name, shape, dtype = graph.name_of(tensor), tuple(tensor.shape[1:]), str(tensor.dtype)
        if any(d is None for d in shape):
            raise say(
                f"input {name!r} has shape {graph.shape_text(shape)}: every dimension but the batch must be "
                f"fixed (keras.Input(shape=...)) so its examples can be made"
            )
        made = {"name": name, "shape": list(shape), "dtype": dtype}
        integer = "int" in dtype or dtype == "bool"
        if not integer and "float" not in dtype:
            raise say(f"input {name!r} is {dtype}: only float, integer and bool inputs can be made")
        vocab = None
        if dtype != "bool" and "high" not in bounds:
            vocab = graph.embedding_size(model, tensor, nested=integer or len(shape) == 1)
        if integer or vocab is not None or "high" in bounds:
            high = bounds.get("high", 2 if dtype == "bool" else vocab)
            if high is None:
                raise say(
                    f"input {name!r} is {dtype} and feeds no Embedding, so its range is unknown: "
                    f"return {{'model': m, 'inputs': {{'{name}': {{'high': N}}}}}}"
                )
            made.update(low=int(bounds.get("low", 0)), high=int(high))
        return made

    def _task(self, model, output: dict, loss, inputs: list) -> dict:
        """The synthetic task and its loss: what the compiled (or returned) loss asks for, else
        classes for a vector output, a regression target otherwise. A sequence output under a
        sparse categorical loss is next-token prediction when an input is its token ids."""
        import keras

        loss_fn = keras.losses.get(loss) if loss is not None else None
        loss_name = str(getattr(loss_fn, "name", None) or getattr(loss_fn, "__name__", "") or loss or "")
        shape = output["shape"]
        kind = graph.task_kind(loss_name, loss_fn, shape, self.classes)
        labelled = "labels" in self.extras
        self.token_input = None
        if kind == "classes" and len(shape) > 1 and shape[-1] > 1 and not labelled:
            tokens = [i for i, m in enumerate(inputs) if "high" in m and m["shape"] == shape[:-1]]
            if tokens:
                kind, self.token_input = "next_token", tokens[0]
                inputs[tokens[0]]["high"] = min(inputs[tokens[0]]["high"], shape[-1])  # ids are labels too
        elif kind in ("classes", "one_hot") and not labelled and (len(shape) != 1 or shape[0] < 2):
            raise say(
                f"output {output['name']!r} has shape {graph.shape_text(shape)}; class labels need a vector of at "
                "least 2 classes, or a sequence with a token-id input of its length (next-token prediction), "
                "or the builder's 'labels'"
            )
        if self.classes is not None and shape[-1] != self.classes:
            raise say(f"output {output['name']!r} has {shape[-1]} classes; the image folder has {self.classes}")
        if loss_fn is None:
            from_logits = not graph.ends_in_softmax(model)
            self.loss_fn = (
                (lambda y, p: keras.losses.sparse_categorical_crossentropy(y, p, from_logits=from_logits))
                if kind == "classes"
                else (lambda y, p: keras.ops.square(p - keras.ops.cast(y, "float32")))
            )
            described = (
                f"sparse categorical cross-entropy{' (from logits)' if from_logits else ''}"
                if kind == "classes"
                else "mean squared error"
            )
        else:
            self.loss_fn = loss_fn.call if isinstance(loss_fn, keras.losses.Loss) else loss_fn
            described = f"{loss_name} (the model's)"
        self.kind = kind
        task = "the builder's labels" if labelled else graph.TASKS[kind].format(classes=shape[-1] if shape else 1)
        return {"loss": described, "task": f"synthetic: {task}"}

    # -- what the engine asks ------------------------------------------------------------------

    def make_optimizer(self, shapes: Shapes):
        import keras

        given = self.extras.get("optimizer")
        if given is None:
            return keras.optimizers.Adam(learning_rate=1e-3)
        if isinstance(given, str):
            return keras.optimizers.get(given)
        # A fresh copy: the builder's instance was made outside the run's strategy scope.
        return type(given).from_config(given.get_config())

    def per_example_loss(self, y_true, y_pred):
        from keras import ops

        if isinstance(y_pred, (list, tuple)) and self.output_index is not None:
            y_pred = y_pred[self.output_index]  # the one output a per-output loss trains
        y_pred = ops.cast(y_pred, "float32")
        losses = self.loss_fn(y_true, y_pred)
        while len(losses.shape) > 1:
            losses = ops.mean(losses, axis=-1)
        return losses

    def flops_per_example(self, model) -> dict:
        # The layer formula where it sees every layer that holds weights; otherwise a custom layer's
        # work would be missed, and the run's MFU takes the compiler's count of one step, labelled so.
        from dashbench.engine.workloads.flops import count_flops, covers

        return count_flops(model) if covers(model) else {}

    def _synthetic(self, shapes: Shapes, batch: int, seed: int):
        import numpy as np

        if self.meta is None:
            self.build_model(shapes)
        rng = np.random.default_rng([seed, 1])
        arrays = []
        for made in self.meta["inputs"]:
            shape = (batch, *made["shape"])
            if "high" in made:
                values = rng.integers(made["low"], made["high"], shape, dtype=np.int64)
                arrays.append(values.astype(bool if made["dtype"] == "bool" else _numpy_dtype(made["dtype"])))
            else:
                arrays.append(rng.standard_normal(shape, dtype=np.float32))
        next_tokens = None
        if self.kind == "next_token" and "labels" not in self.extras:
            made = self.meta["inputs"][self.token_input]
            text = lm_text.text(made["high"], made["shape"][0], batch, np.random.default_rng([seed, 3]))
            arrays[self.token_input] = text[:, :-1].astype(_numpy_dtype(made["dtype"]))
            next_tokens = text[:, 1:]
        x = arrays[0] if len(arrays) == 1 else tuple(arrays)
        if "labels" in self.extras:
            with user_code(f"{self.where}: its labels function", "return"):
                try:
                    y = np.asarray(self.extras["labels"](x))
                except Exception as exc:
                    raise say(f"{self.where}: its labels function raised {one_line(exc, typed=True)}") from None
            return x, y
        if next_tokens is not None:
            return x, next_tokens
        return x, self._targets(arrays, self.meta["inputs"], batch, seed)

    def _targets(self, arrays, made, batch: int, seed: int):
        import numpy as np

        groups = []
        for array, spec in zip(arrays, made):
            flat = array.reshape(batch, -1).astype(np.float32)
            if "high" in spec:
                flat = flat / max(1, spec["high"])
            chunks = np.array_split(np.arange(flat.shape[1]), min(FEATURE_GROUPS, flat.shape[1]))
            groups.append(np.stack([flat[:, c].mean(axis=1) for c in chunks], axis=1))
        features = np.concatenate(groups, axis=1)
        features = (features - features.mean(axis=0, keepdims=True)) / (features.std(axis=0, keepdims=True) + 1e-6)
        shape = self.meta["outputs"][self.output_index or 0]["shape"]
        width = shape[-1] if self.kind == "classes" else int(np.prod(shape)) if shape else 1
        projection = np.random.default_rng([seed, 2]).standard_normal((features.shape[1], width), dtype=np.float32)
        scores = features @ projection / np.sqrt(features.shape[1])
        if self.kind == "classes":  # a sequence output: the same class at every position
            labels = np.argmax(scores, axis=-1).astype(np.int32)
            return np.broadcast_to(labels.reshape(batch, *[1] * (len(shape) - 1)), (batch, *shape[:-1])).copy()
        if self.kind == "one_hot":
            return np.eye(width, dtype=np.float32)[np.argmax(scores, axis=-1)]
        if self.kind == "binary":
            return (scores > 0).astype(np.float32).reshape(batch, *shape)
        return scores.astype(np.float32).reshape(batch, *shape)

    def data_shapes(self, shapes: Shapes) -> Shapes:
        """An image folder is read at the size and colours the model's one input takes."""
        self.classes = shapes.classes or None
        model = self.build_model(shapes)
        if len(model.inputs) != 1 or len(model.inputs[0].shape) != 4:
            raise say(
                f"{self.where}: an image folder feeds a model of one image input (height, width, "
                f"channels); this one's inputs are {[graph.shape_text(t.shape[1:]) for t in model.inputs]}"
            )
        height, width, channels = model.inputs[0].shape[1:]
        if height != width or channels not in (1, 3):
            raise say(
                f"input {graph.name_of(model.inputs[0])!r} has shape {graph.shape_text((height, width, channels))}: an "
                f"image folder is read square, with 1 or 3 channels"
            )
        return Shapes(image_size=int(height), channels=int(channels), classes=shapes.classes)

    def real_dataset(self, data_path, global_batch, seed):
        raise say("a model file has no Fashion-MNIST reader: use --data folder (an image folder) or synthetic")

    real_batches = real_dataset

    def identity(self, model) -> dict:
        return {
            "source": "builder" if self.builder else "keras",
            "file": self.path.name,
            "builder": self.builder,
            "sha256": self.sha,
            "parameters": int(model.count_params()),
            **(self.meta or {}),
            "optimizer": self._optimizer_name(),
        }

    def _optimizer_name(self) -> str:
        given = self.extras.get("optimizer")
        return "Adam" if given is None else given if isinstance(given, str) else type(given).__name__

    def facts(self, model=None) -> dict:
        """What the memory estimate needs (dashbench/workloads/memory.py): parameters, optimizer slots, and the
        elements per example of the inputs and of every layer's output."""
        import numpy as np

        model = model if model is not None else self.build_model(Shapes(classes=self.classes or 0))
        activations = 0
        for layer in model.layers:
            for tensor in graph.outputs_of(layer):
                activations += int(np.prod([d for d in tensor.shape[1:] if d is not None] or [1]))
        slots = {
            "Adam": 2,
            "AdamW": 2,
            "Nadam": 2,
            "Adamax": 2,
            "SGD": 1,
            "RMSprop": 1,
            "Adagrad": 1,
            "Lion": 1,
            "Adafactor": 1,
        }.get(self._optimizer_name(), 2)
        inputs = sum(int(np.prod(m["shape"] or [1])) for m in self.meta["inputs"])
        return {"parameters": int(model.count_params()), "slots": slots, "activations": activations, "inputs": inputs}


CONFIG_LIMIT = 64 * 2**20  # a .keras file's config.json beyond this is not read for class names


def _unregistered_classes(keras, path: Path) -> list[str]:
    """The classes a .keras file's config names that are neither Keras's own nor registered in this
    process (its registered name, `package>Name`, where it has one), in the order they appear."""
    import json
    import zipfile

    try:
        with zipfile.ZipFile(path) as archive:
            if archive.getinfo("config.json").file_size > CONFIG_LIMIT:
                return []
            config = json.loads(archive.read("config.json"))
    except (OSError, KeyError, ValueError, zipfile.BadZipFile):
        return []
    found: list[str] = []
    pending = [config]
    while pending:
        item = pending.pop(0)
        if isinstance(item, list):
            pending.extend(item)
            continue
        if not isinstance(item, dict):
            continue
        pending.extend(item.values())
        name, module = item.get("class_name"), item.get("module")
        if not isinstance(name, str) or "module" not in item or name.startswith("__"):
            continue
        if isinstance(module, str) and module.split(".")[0] == "keras":
            continue
        registered = item.get("registered_name") if isinstance(item.get("registered_name"), str) else name
        if keras.saving.get_registered_object(registered) is None and registered not in found:
            found.append(registered)
    return found


def _numpy_dtype(dtype: str):
    import numpy as np

    return np.dtype(dtype) if dtype != "bfloat16" else np.float32


def prepare(spec, check_memory=None, shapes=None) -> None:
    """Before a run of a model file has a row: the file is there and unchanged, it imports in time,
    its builder gives a model whose inputs can be made, and the memory estimate knows its counts.
    Bad input is a SpecError here, in the run's own process, never a `failed` run.
    `check_memory(spec)`: called with the counts of a build that allocated no weight (user_abstract),
    before the real build; its SpecError is raised with `before_build` set. `shapes`: what
    catalog.check_spec returned for `spec`, where the caller has checked it in this process already."""
    from dashbench.engine import backends
    from dashbench.workloads import catalog, memory_counts

    if shapes is None:
        shapes = catalog.check_spec(spec)
    backends.select(spec.backend)
    # The framework first, quietly: its C++ start-up lines would bury the one line of bad input.
    backends.get(spec.backend).import_framework()
    user = workload(spec)
    if _joins_peers():
        # Building the model now would start the framework before the multi-host start joins this host
        # to its peers (jax.distributed.initialize, TF_CONFIG's strategy): the engine builds it after.
        return
    abstract = user_abstract.facts(user, shapes) if check_memory is not None else None
    if abstract is not None:
        memory_counts.know(spec.model, abstract)
        try:
            check_memory(spec)
        except SpecError as exc:
            exc.before_build = True
            raise
    if spec.data == "folder":
        shapes = user.data_shapes(shapes)
    # The counts come from this build: building again for them would run the user's builder once more.
    memory_counts.know(spec.model, user.facts(user.build_model(shapes)))


def _joins_peers() -> bool:
    """Whether this process is one host's of a multi-host run (JAX's multi-host start, or TF_CONFIG)."""
    from dashbench.engine import backends

    return backends.get("jax").joins_cluster_first() or bool(os.environ.get("TF_CONFIG"))
