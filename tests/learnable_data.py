"""A learnable 10-class image set made here (nothing is downloaded): real Fashion-MNIST-style IDX
files (train + t10k, as dashbench.models.datasets finds them) and an image folder of PNGs (train/ and
validation/, a subfolder per class, as keras.utils.image_dataset_from_directory reads it).

Each class is a bright square at its own place on a noisy background, shifted a little per image;
the seed CNN at quick shapes (width 16) passes 90% validation accuracy within a few dozen steps.
A few labels (LABEL_NOISE) are wrong on purpose, in both splits, so 100% is out of reach: a target
of 1.0 is never met, which the not-reached tests rely on.

Fixtures (session-scoped; import them into a test module):
  learnable_idx      folder with the four IDX files, uncompressed
  learnable_idx_gz   the same set gzipped (*.gz)
  learnable_folder   image folder of 28×28 grayscale PNGs
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dashbench.models.datasets import write_idx

CLASSES = 10
SIDE = 28
TRAIN = 600
VALIDATION = 200
LABEL_NOISE = 0.04  # the best possible accuracy is about 1 - LABEL_NOISE
SQUARE = 8
IDX_NAMES = {"train": ("train-images-idx3-ubyte", "train-labels-idx1-ubyte"),
             "t10k": ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")}


def learnable_images(count: int, seed: int, side: int = SIDE, classes: int = CLASSES,
                     label_noise: float = LABEL_NOISE) -> tuple[np.ndarray, np.ndarray]:
    """(images (count, side, side) uint8, labels (count,) uint8): class k's square sits at the k-th
    place of a grid over the image, shifted up to 2 px, on uniform noise."""
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, classes, count)
    images = rng.integers(0, 60, (count, side, side)).astype(np.uint8)
    square = max(2, side * SQUARE // SIDE)
    grid = int(np.ceil(np.sqrt(classes)))
    cell = (side - square) // max(grid - 1, 1)
    shift = max(1, side // 14)
    for index, label in enumerate(labels):
        row, col = divmod(int(label), grid)
        top = min(max(row * cell + rng.integers(-shift, shift + 1), 0), side - square)
        left = min(max(col * cell + rng.integers(-shift, shift + 1), 0), side - square)
        images[index, top : top + square, left : left + square] = rng.integers(200, 256)
    wrong = rng.random(count) < label_noise
    labels[wrong] = (labels[wrong] + rng.integers(1, classes, int(wrong.sum()))) % classes
    return images, labels.astype(np.uint8)


def write_learnable_idx(folder: Path, train: int = TRAIN, test: int = VALIDATION, gz: bool = False,
                        seed: int = 0) -> Path:
    """The four IDX files (train + t10k) in `folder`, named as dashbench.models.datasets looks for them."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for split, count, split_seed in (("train", train, seed), ("t10k", test, seed + 1)):
        images, labels = learnable_images(count, split_seed)
        suffix = ".gz" if gz else ""
        write_idx(folder / (IDX_NAMES[split][0] + suffix), images)
        write_idx(folder / (IDX_NAMES[split][1] + suffix), labels)
    return folder


def class_names(classes: int = CLASSES) -> list[str]:
    return [f"class_{index:02d}" for index in range(classes)]


def write_learnable_folder(folder: Path, train: int = TRAIN, validation: int = VALIDATION, side: int = SIDE,
                           rgb: bool = False, classes: int = CLASSES, seed: int = 0) -> Path:
    """An image folder: folder/train/class_00/0.png …, folder/validation/…, PNGs of `side` px,
    grayscale (or RGB: the same image in all three channels)."""
    from PIL import Image

    folder = Path(folder)
    names = class_names(classes)
    for split, count, split_seed in (("train", train, seed), ("validation", validation, seed + 1)):
        images, labels = learnable_images(count, split_seed, side=side, classes=classes)
        for name in names:
            (folder / split / name).mkdir(parents=True, exist_ok=True)
        for index, (image, label) in enumerate(zip(images, labels)):
            picture = Image.fromarray(image, mode="L")
            (picture.convert("RGB") if rgb else picture).save(folder / split / names[label] / f"{index}.png")
    return folder


@pytest.fixture(scope="session")
def learnable_idx(tmp_path_factory) -> Path:
    return write_learnable_idx(tmp_path_factory.mktemp("learnable_idx"))


@pytest.fixture(scope="session")
def learnable_idx_gz(tmp_path_factory) -> Path:
    return write_learnable_idx(tmp_path_factory.mktemp("learnable_idx_gz"), gz=True)


@pytest.fixture(scope="session")
def learnable_folder(tmp_path_factory) -> Path:
    return write_learnable_folder(tmp_path_factory.mktemp("learnable_folder"))
