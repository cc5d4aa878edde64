"""What a user's Keras model says about itself: its tensors' names, the vocabulary an input feeds
(an Embedding at the top of the graph or inside a custom layer), the output its loss trains, and a
subclassed model given symbolic inputs from the shapes its builder names."""

from __future__ import annotations

from typing import Optional

from dashbench.engine.workloads.user_import import say

INPUT_KEYS = ("shape", "dtype", "low", "high")


def name_of(tensor) -> str:
    """The name of the layer that makes a tensor (an Input's own name), else the tensor's."""
    history = getattr(tensor, "_keras_history", None)
    operation = getattr(history, "operation", None) or (history[0] if isinstance(history, tuple) and history else None)
    return str(getattr(operation, "name", None) or getattr(tensor, "name", "") or "input").split(":")[0]


def shape_text(shape) -> str:
    return "(" + ", ".join("None" if d is None else str(d) for d in shape) + ("," if len(shape) == 1 else "") + ")"


def embedding_size(model, tensor, nested: bool = True) -> Optional[int]:
    """The vocabulary of the Embedding an input feeds: one it feeds directly, else (`nested`) the
    smallest of those inside the layers it feeds (keras.io's TokenAndPositionEmbedding holds a token
    and a position Embedding: ids below the smaller are valid for either)."""
    import keras

    inside: list[int] = []
    for layer in model.layers:
        if not _feeds(layer, tensor):
            continue
        if isinstance(layer, keras.layers.Embedding):
            return int(layer.input_dim)
        if nested:
            inside += [int(s.input_dim) for s in _sublayers(layer) if isinstance(s, keras.layers.Embedding)]
    return min(inside) if inside else None


def _feeds(layer, tensor) -> bool:
    for node in getattr(layer, "_inbound_nodes", []):
        if any(t is tensor or name_of(t) == name_of(tensor) for t in getattr(node, "input_tensors", [])):
            return True
    return False


def _sublayers(layer) -> list:
    """Every layer inside `layer`, at any depth (Keras tracks a custom layer's attributes)."""
    flatten = getattr(layer, "_flatten_layers", None)
    if flatten is not None:
        return list(flatten(include_self=False, recursive=True))
    out = []
    for inner in getattr(layer, "layers", []):
        out += [inner, *_sublayers(inner)]
    return out


def ends_in_softmax(model) -> bool:
    import keras

    last = model.layers[-1] if model.layers else None
    activation = getattr(last, "activation", None)
    return isinstance(last, keras.layers.Softmax) or getattr(activation, "__name__", "") == "softmax"


def outputs_of(layer) -> list:
    try:
        out = layer.output
    except (AttributeError, ValueError):
        return []
    return list(out) if isinstance(out, (list, tuple)) else [out]


def has_symbolic_inputs(model) -> bool:
    try:
        return bool(model.inputs)
    except (AttributeError, ValueError):
        return False


def symbolic(model, where: str, wanted: dict):
    """A model without symbolic inputs (a subclassed keras.Model with call()) as a functional model
    over Inputs of the shapes and dtypes its builder names in 'inputs' (or one `model.build(shape)`
    was given), in their order: one input is called with its tensor, several with their list."""
    import keras

    shaped = {name: spec for name, spec in wanted.items() if isinstance(spec, dict) and "shape" in spec}
    if not shaped:
        built = getattr(model, "_build_shapes_dict", None) or {}
        shape = next(iter(built.values())) if len(built) == 1 else None
        if isinstance(shape, (tuple, list)) and len(shape) > 1 and all(isinstance(d, int) for d in shape[1:]):
            shaped = {"input": {"shape": tuple(shape[1:]), "dtype": "float32"}}
    if not shaped:
        raise say(
            f"{where}() returned {type(model).__name__}, which has no symbolic inputs (a subclassed model): "
            "return {'model': m, 'inputs': {'x': {'shape': (784,), 'dtype': 'float32'}}}, each input's "
            "shape without the batch and its dtype, in the order call() takes them"
        )
    tensors = []
    for name, spec in shaped.items():
        shape = spec["shape"]
        if not isinstance(shape, (tuple, list)) or not all(isinstance(d, int) and d > 0 for d in shape):
            raise say(f"{where}(): inputs[{name!r}]['shape'] must be whole numbers > 0 (batch aside), got {shape!r}")
        try:
            tensors.append(keras.Input(tuple(shape), dtype=spec.get("dtype", "float32"), name=name))
        except (TypeError, ValueError) as exc:
            raise say(f"{where}(): inputs[{name!r}] is not a Keras input: {' '.join(str(exc).split())}") from None
    from dashbench.engine.workloads.user_import import one_line

    try:
        outputs = model(tensors[0] if len(tensors) == 1 else tensors)
    except Exception as exc:
        raise say(f"{where}(): calling {type(model).__name__} on its inputs raised {one_line(exc)}") from None
    return keras.Model(tensors, outputs, name=model.name)


def check_inputs(where: str, wanted) -> dict:
    """The builder's 'inputs': {name: {shape, dtype, low, high}}; anything else named in one line."""
    if not isinstance(wanted, dict) or not all(isinstance(v, dict) for v in wanted.values()):
        raise say(f"{where}(): 'inputs' must map input names to {{{', '.join(repr(k) for k in INPUT_KEYS)}}}")
    for name, spec in wanted.items():
        unknown = [key for key in spec if key not in INPUT_KEYS]
        if unknown:
            raise say(f"{where}(): inputs[{name!r}] has {unknown[0]!r}; its keys are {', '.join(INPUT_KEYS)}")
    return wanted


def trained_output(model, where: str, loss) -> tuple[Optional[int], object]:
    """Which output a per-output loss trains ([loss, None], or {output name: loss}), and that loss;
    (None, loss) when the loss is one for the whole model."""
    if not isinstance(loss, (list, tuple, dict)):
        return (0 if len(model.outputs) == 1 else None), loss
    names = [name_of(t) for t in model.outputs]
    entries = list(loss) if not isinstance(loss, dict) else [loss.get(n) for n in names]
    trained = [i for i, entry in enumerate(entries) if entry is not None]
    if len(entries) != len(names) or len(trained) != 1:
        raise say(
            f"{where}: its losses {_loss_names(entries)} are for {len(names)} outputs; dashbench trains one "
            "output: give exactly one a loss (the others None)"
        )
    return trained[0], entries[trained[0]]


def _loss_names(entries: list) -> str:
    return "[" + ", ".join("None" if e is None else str(getattr(e, "name", e)) for e in entries) + "]"
