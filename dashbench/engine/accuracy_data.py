"""A to-accuracy run's data on the host, the same for both backends: the train and held-out splits
as numpy arrays — images in uint8 (scaled to [0, 1] on the device, inside the step), or an LM's
token ids in int32 with the next tokens as labels (dashbench.workloads.lm_text) — the training batches
shuffled per seed, the held-out split in padded batches with a mask, and the plan of steps,
evaluations and host calls."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass

import numpy as np

from dashbench.core.spec import MAX_SAMPLES, SpecError
from dashbench.workloads import lm_text
from dashbench.workloads.datasets import FASHION_CLASSES, check_image_folder, load_fashion_mnist, load_image_folder


@dataclass(frozen=True)
class Data:
    x_train: np.ndarray  # (N, size, size, channels) uint8; tokens: (N, seq_len) int32
    y_train: np.ndarray  # (N,) int32; tokens: (N, seq_len), the next tokens
    x_val: np.ndarray
    y_val: np.ndarray
    dataset: dict  # {name, train_examples, validation_examples, classes}, as the result stores it
    load_s: float

    @property
    def tokens(self) -> bool:
        """Token ids (fed as they are) rather than images (scaled to [0, 1] in the step)."""
        return self.y_train.ndim > 1


@dataclass(frozen=True)
class Plan:
    steps_per_epoch: int
    eval_every: int  # training steps between evaluations
    total_steps: int  # the most steps one seed trains
    steps_per_call: int  # training steps per host call: divides eval_every and total_steps

    def evaluations(self) -> list[int]:
        """The steps after which the held-out split is evaluated: every eval_every, and at the end."""
        points = list(range(self.eval_every, self.total_steps + 1, self.eval_every))
        return points if points and points[-1] == self.total_steps else points + [self.total_steps]


def load(spec, shapes) -> Data:
    """Both splits of the spec's data into memory, timed (data loading is reported apart)."""
    start = time.perf_counter()
    if spec.data == "synthetic":  # an LM's teacher text (spec.HELD_OUT_SYNTHETIC_MODELS)
        x_train, y_train, x_val, y_val = lm_text.splits(shapes.vocab, shapes.seq_len, spec.seed)
        dataset = {
            "name": lm_text.DATASET_NAME,
            "train_examples": int(len(y_train)),
            "validation_examples": int(len(y_val)),
            "classes": int(shapes.vocab),
            "tokens_per_example": int(shapes.seq_len),
            "loss_floor": lm_text.entropy_floor(shapes.vocab, shapes.seq_len),
        }
        return Data(x_train, y_train, x_val, y_val, dataset, time.perf_counter() - start)
    if spec.data == "folder":
        classes = len(check_image_folder(spec.data_path)["classes"])
        x_train, y_train = load_image_folder(spec.data_path, "train", shapes.image_size, shapes.channels)
        x_val, y_val = load_image_folder(spec.data_path, "validation", shapes.image_size, shapes.channels)
        name = "folder"
    else:
        classes = FASHION_CLASSES
        x_train, y_train = load_fashion_mnist(spec.data_path, classes, "train")
        x_val, y_val = load_fashion_mnist(spec.data_path, classes, "t10k")
        name = "fashion_mnist"
    dataset = {
        "name": name,
        "train_examples": int(len(y_train)),
        "validation_examples": int(len(y_val)),
        "classes": int(classes),
    }
    return Data(x_train, y_train, x_val, y_val, dataset, time.perf_counter() - start)


def plan(spec, train_examples: int) -> Plan:
    """Steps per epoch (one pass over the train split unless the spec says), the evaluation interval,
    the most steps, and the host call's steps: steps_per_loop where it divides the evaluation
    interval and the last evaluation, else their greatest common divisor, so every host call runs
    one compiled program."""
    per_epoch = spec.steps_per_epoch or train_examples // spec.batch_size
    if per_epoch < 1:
        raise SpecError(
            "batch_size",
            f"the train split holds {train_examples} examples, fewer than one batch of "
            f"{spec.batch_size}: use a smaller batch, or set steps_per_epoch (the data "
            f"then repeats)",
        )
    total = per_epoch * spec.epoch_limit()
    every = min(spec.eval_every or per_epoch, total)
    k = math.gcd(math.gcd(spec.steps_per_loop, every), total)
    calls = spec.seeds * (total // k)
    if calls > MAX_SAMPLES:
        raise SpecError(
            "steps_per_loop",
            f"{spec.seeds} seed(s) × {total} steps at {k} step(s) per host call are "
            f"{calls} samples; a run records at most {MAX_SAMPLES}: use a larger "
            f"steps_per_loop that divides {every} (the steps between evaluations)",
        )
    return Plan(per_epoch, every, total, k)


def training_batches(data: Data, batch: int, k: int, seed: int):
    """For ever: (xs, ys) of k global batches stacked, (k, batch, …), from a stream of the train
    split's indices, one fresh permutation per pass, drawn from the seed (the same on both backends)."""
    rng = np.random.default_rng([seed, 23])
    count = len(data.y_train)
    order, position = rng.permutation(count), 0
    while True:
        picked = []
        need = k * batch
        while need:
            if position == count:
                order, position = rng.permutation(count), 0
            take = min(need, count - position)
            picked.append(order[position : position + take])
            position += take
            need -= take
        index = np.concatenate(picked)
        yield (
            data.x_train[index].reshape(k, batch, *data.x_train.shape[1:]),
            data.y_train[index].reshape(k, batch, *data.y_train.shape[1:]),
        )


def evaluation_batches(data: Data, batch: int) -> list[tuple[np.ndarray, np.ndarray, np.ndarray]]:
    """The whole held-out split in global batches (x, y, mask): the last one padded to full size
    with mask 0, so every evaluation call has one shape and the padding counts for nothing."""
    count = len(data.y_val)
    padded = -(-count // batch) * batch
    x = np.zeros((padded, *data.x_val.shape[1:]), data.x_val.dtype)
    y = np.zeros((padded, *data.y_val.shape[1:]), np.int32)
    mask = np.zeros((padded,), np.float32)
    x[:count], y[:count], mask[:count] = data.x_val, data.y_val, 1.0
    return [(x[i : i + batch], y[i : i + batch], mask[i : i + batch]) for i in range(0, padded, batch)]
