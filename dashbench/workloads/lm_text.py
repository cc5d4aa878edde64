"""The LM's synthetic text, numpy only: the fixed random bigram teacher, the throughput run's batch,
a to-accuracy run's train and held-out splits, and the teacher's entropy floor, the lowest validation
loss any model can reach on its text. No Keras here: the catalog refuses an unreachable target with
it before a framework starts, and both backends read the same arrays.
"""

from __future__ import annotations

import functools
import math

import numpy as np

# Each token's successor is one of this many fixed random tokens, uniformly: the loss can fall from
# ln(vocab) towards ln(4) ≈ 1.39, and a model that learns nothing stays at ln(vocab).
SUCCESSORS = 4
TEACHER_SEED = 2026  # one teacher for every run: seeds differ in the text, not the language
# A to-accuracy run's splits, in tokens (sequences of the run's length, at least one each). The
# train split is enough text to learn the teacher within an epoch or two at the quick shapes; the
# held-out split is evaluated whole at every evaluation, so it is kept small.
TRAIN_TOKENS = 2**20
VALIDATION_TOKENS = 2**15
DATASET_NAME = "teacher_text"


@functools.lru_cache(maxsize=8)
def successors(vocab: int) -> np.ndarray:
    """(vocab, SUCCESSORS) int64: the teacher's table, the same for every run of this vocabulary."""
    table = np.random.default_rng(TEACHER_SEED).integers(0, vocab, (vocab, SUCCESSORS), dtype=np.int64)
    table.setflags(write=False)
    return table


def text(vocab: int, seq_len: int, count: int, rng: np.random.Generator) -> np.ndarray:
    """(count, seq_len + 1) int32 of teacher text: a uniform first token, then each token's successor."""
    table = successors(vocab)
    out = np.empty((count, seq_len + 1), dtype=np.int64)
    out[:, 0] = rng.integers(0, vocab, count)
    choices = rng.integers(0, SUCCESSORS, (count, seq_len))
    for t in range(seq_len):
        out[:, t + 1] = table[out[:, t], choices[:, t]]
    return out.astype(np.int32)


def batch(vocab: int, seq_len: int, size: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """A throughput run's one global batch (tokens, next tokens), each (size, seq_len) int32."""
    sequences = text(vocab, seq_len, size, np.random.default_rng([seed, 2]))
    return sequences[:, :-1], sequences[:, 1:]


def splits(vocab: int, seq_len: int, seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(x_train, y_train, x_val, y_val) from two independent streams of the seed. A train sequence
    identical to a held-out one is dropped, so no held-out text is ever trained on (at seq_len 16 and
    more none is: 4^16 continuations of every first token)."""
    validation = text(vocab, seq_len, max(1, VALIDATION_TOKENS // seq_len), np.random.default_rng([seed, 34, 1]))
    train = text(vocab, seq_len, max(1, TRAIN_TOKENS // seq_len), np.random.default_rng([seed, 34, 0]))
    held_out = {row.tobytes() for row in validation}
    keep = np.fromiter((row.tobytes() not in held_out for row in train), dtype=bool, count=len(train))
    train = train[keep]
    return train[:, :-1], train[:, 1:], validation[:, :-1], validation[:, 1:]


@functools.lru_cache(maxsize=8)
def entropy_floor(vocab: int, seq_len: int) -> float:
    """The teacher's conditional entropy per predicted token, in nats, averaged over a sequence's
    positions: the expected validation loss of a model that knows the teacher exactly, below which no
    model's mean next-token cross-entropy falls. The next token depends on the current one only
    (the prefix adds nothing), so it is sum_c P(x_t = c) H(successor | c), with x_0 uniform and P
    carried through the chain until it settles."""
    table = successors(vocab)
    same = (np.sort(table, axis=1)[:, :, None] == np.sort(table, axis=1)[:, None, :]).sum(axis=-1)
    per_token = -np.log(same / SUCCESSORS).mean(axis=1)  # a repeated successor is likelier, so below ln 4
    p = np.full(vocab, 1.0 / vocab)
    total, t = 0.0, 0
    while t < seq_len:
        h = float(p @ per_token)
        following = np.bincount(table.ravel(), weights=np.repeat(p / SUCCESSORS, SUCCESSORS), minlength=vocab)
        total += h
        t += 1
        if np.abs(following - p).sum() < 1e-9:  # settled: every later position has the same entropy
            total += h * (seq_len - t)
            break
        p = following
    floor = total / seq_len
    assert math.isfinite(floor) and floor >= 0
    return floor
