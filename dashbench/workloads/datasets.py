"""Real data: Fashion-MNIST's IDX files (train, and t10k as the held-out split) and image folders
(train/ and validation/, a subfolder per class): finding, checking, reading. No TensorFlow here: the
catalog checks a run's files before the run exists; the engine builds its pipelines on top."""

from __future__ import annotations

import gzip
import os
import struct
from pathlib import Path
from typing import Optional

import numpy as np

from dashbench.core.spec import SpecError

FASHION_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")
# The held-out split a to-accuracy run evaluates on: Fashion-MNIST's 10,000 test images.
FASHION_TEST_FILES = ("t10k-images-idx3-ubyte", "t10k-labels-idx1-ubyte")
SPLIT_FILES = {"train": FASHION_FILES, "t10k": FASHION_TEST_FILES}
KERAS_FASHION_CACHE = Path("~/.keras/datasets/fashion-mnist")
FASHION_CLASSES = 10


def fashion_mnist_dir(data_path: Optional[str], files: tuple = FASHION_FILES) -> Path:
    """The folder holding the Fashion-MNIST IDX `files` (the training ones by default), or a SpecError
    saying where to put them."""
    folder = Path(data_path).expanduser() if data_path else KERAS_FASHION_CACHE.expanduser()
    missing = [name for name in files if _idx_file(folder, name) is None]
    if missing:
        hint = "pass --data-path FOLDER" if not data_path else "check the folder"
        raise SpecError(
            "data_path",
            f"no Fashion-MNIST file {missing[0]}[.gz] in {folder}; {hint}, or fill Keras's cache with "
            "keras.datasets.fashion_mnist.load_data()",
        )
    return folder


def check_fashion_mnist(data_path: Optional[str], classes: int, held_out: bool = False) -> Path:
    """The files' soundness without loading the images: their headers agree, and the (small) label
    file holds class numbers; with `held_out`, the t10k files too, with the training images' shape.
    Run before a run row exists, so a wrong file is an input error."""
    folder = fashion_mnist_dir(data_path, FASHION_FILES + (FASHION_TEST_FILES if held_out else ()))
    image_dims = _idx_dims(_idx_file(folder, FASHION_FILES[0]))
    _check_labels(folder, image_dims, read_idx(_idx_file(folder, FASHION_FILES[1])), classes)
    if held_out:
        test_dims = _idx_dims(_idx_file(folder, FASHION_TEST_FILES[0]))
        _check_labels(folder, test_dims, read_idx(_idx_file(folder, FASHION_TEST_FILES[1])), classes)
        if tuple(test_dims[1:]) != tuple(image_dims[1:]):
            raise SpecError(
                "data_path",
                f"the t10k images in {folder} are {tuple(test_dims[1:])}, the train "
                f"images {tuple(image_dims[1:])}: both splits must have one size",
            )
    return folder


def load_fashion_mnist(data_path: Optional[str], classes: int, split: str = "train") -> tuple[np.ndarray, np.ndarray]:
    """One split's images (N, 28, 28, 1) uint8 and labels (N,) from IDX files, gzipped or not:
    split "train" or "t10k" (the held-out test images)."""
    files = SPLIT_FILES[split]
    folder = fashion_mnist_dir(data_path, files)
    images = read_idx(_idx_file(folder, files[0]))
    labels = read_idx(_idx_file(folder, files[1]))
    _check_labels(folder, images.shape, labels, classes)
    return images[..., None], labels.astype(np.int32)


def _idx_dims(path: Path) -> tuple:
    """An IDX file's sizes from its header alone; an uncompressed file must be exactly that long."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as handle:
        head = handle.read(4)
        if len(head) < 4 or head[0:2] != b"\x00\x00":
            raise SpecError("data_path", f"{path} is not an IDX file")
        sizes = handle.read(4 * head[3])
    if len(sizes) != 4 * head[3]:
        raise SpecError("data_path", f"{path}: the IDX header is cut short")
    dims = struct.unpack(f">{head[3]}I", sizes)
    item = {0x08: 1, 0x09: 1, 0x0B: 2, 0x0C: 4, 0x0D: 4, 0x0E: 8}.get(head[2])
    if item is None:
        raise SpecError("data_path", f"{path}: unknown IDX type code 0x{head[2]:02x}")
    expected = 4 + 4 * len(dims) + item * int(np.prod(dims))
    if not str(path).endswith(".gz") and path.stat().st_size != expected:
        raise SpecError(
            "data_path",
            f"{path}: header says {dims} ({expected} bytes) but the file has "
            f"{path.stat().st_size} bytes (truncated or not this format?)",
        )
    return dims


def _check_labels(folder: Path, image_shape: tuple, labels: np.ndarray, classes: int) -> None:
    if len(image_shape) != 3 or labels.ndim != 1 or image_shape[0] != len(labels):
        raise SpecError(
            "data_path", f"IDX files in {folder} disagree: images {tuple(image_shape)}, labels {labels.shape}"
        )
    if len(labels) and (labels.min() < 0 or labels.max() >= classes):
        # Caught here, not by the loss op: TF's error would come mid-run, wrapped in a graph trace.
        raise SpecError(
            "data_path",
            f"labels in {folder} must be class numbers 0–{classes - 1}; found "
            f"{int(labels.min())}–{int(labels.max())} (a different dataset's file?)",
        )


def read_idx(path: Path) -> np.ndarray:
    """Read an IDX file (the MNIST format): zero bytes, a type code, the rank, big-endian sizes, data."""
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "rb") as handle:
        data = handle.read()
    if len(data) < 4 or data[0:2] != b"\x00\x00":
        raise SpecError("data_path", f"{path} is not an IDX file")
    type_code, rank = data[2], data[3]
    dtypes = {0x08: ">u1", 0x09: ">i1", 0x0B: ">i2", 0x0C: ">i4", 0x0D: ">f4", 0x0E: ">f8"}
    if type_code not in dtypes:
        raise SpecError("data_path", f"{path}: unknown IDX type code 0x{type_code:02x}")
    dims = struct.unpack(f">{rank}I", data[4 : 4 + 4 * rank])
    array = np.frombuffer(data, dtype=dtypes[type_code], offset=4 + 4 * rank)
    if array.size != int(np.prod(dims)):
        raise SpecError("data_path", f"{path}: header says {dims} but holds {array.size} values")
    return array.reshape(dims).astype(array.dtype.newbyteorder("="))


def write_idx(path: Path, array: np.ndarray) -> None:
    """Write a uint8 array as an IDX file (gzipped when the name ends in .gz); used by tests and tools."""
    array = np.ascontiguousarray(array, dtype=np.uint8)
    header = bytes([0, 0, 0x08, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape)
    opener = gzip.open if str(path).endswith(".gz") else open
    with opener(path, "wb") as handle:
        handle.write(header + array.tobytes())


def _idx_file(folder: Path, name: str) -> Optional[Path]:
    for candidate in (folder / name, folder / f"{name}.gz"):
        if candidate.is_file():
            return candidate
    return None


# -- image folders -------------------------------------------------------------------------------

# The formats keras.utils.image_dataset_from_directory reads.
IMAGE_SUFFIXES = (".png", ".jpg", ".jpeg", ".bmp", ".gif")
FOLDER_SPLITS = ("train", "validation")
LAYOUT = "an image folder holds train/ and validation/, each with one subfolder of images per class"


def check_image_folder(data_path: Optional[str]) -> dict:
    """An image folder's layout, without opening an image: train/ and validation/ with the same class
    subfolders (at least two) and images in both splits. Returns {"classes": [names, sorted],
    "train_examples": n, "validation_examples": n}; SpecError("data_path", …) otherwise."""
    if not data_path:
        raise SpecError("data_path", f"data folder needs --data-path FOLDER: {LAYOUT}")
    folder = Path(data_path).expanduser()
    if not folder.is_dir():
        raise SpecError("data_path", f"{folder} is not a folder: {LAYOUT}")
    found = {}
    for split in FOLDER_SPLITS:
        if not (folder / split).is_dir():
            raise SpecError("data_path", f"{folder} has no {split}/ folder: {LAYOUT}")
        found[split] = {
            path.name: _count_images(path)
            for path in (folder / split).iterdir()
            if path.is_dir() and not _hidden(path.name)
        }
    train, validation = (found[split] for split in FOLDER_SPLITS)
    if set(train) != set(validation):
        only_train, only_val = sorted(set(train) - set(validation)), sorted(set(validation) - set(train))
        parts = ([f"only in train/: {', '.join(only_train[:5])}"] if only_train else []) + (
            [f"only in validation/: {', '.join(only_val[:5])}"] if only_val else []
        )
        raise SpecError(
            "data_path",
            f"the classes differ between train/ and validation/ in {folder} "
            f"({'; '.join(parts)}): both splits need the same class subfolders",
        )
    if len(train) < 2:
        raise SpecError(
            "data_path", f"{folder}/train has {len(train)} class subfolder(s); a classifier needs at least 2: {LAYOUT}"
        )
    for split in FOLDER_SPLITS:
        if not sum(found[split].values()):
            raise SpecError(
                "data_path",
                f"{folder}/{split} holds no images ({', '.join(IMAGE_SUFFIXES)}) in its class subfolders or below them",
            )
    return {
        "classes": sorted(train),
        "train_examples": sum(train.values()),
        "validation_examples": sum(validation.values()),
    }


def load_image_folder(data_path: str, split: str, image_size: int, channels: int) -> tuple[np.ndarray, np.ndarray]:
    """One split's images resized to image_size × image_size (bilinear), grayscale for 1 channel or
    RGB for 3, as (N, size, size, channels) uint8, and labels (N,) int32: the class's index among the
    sorted subfolder names, as keras.utils.image_dataset_from_directory numbers them."""
    from PIL import Image, UnidentifiedImageError

    classes = check_image_folder(data_path)["classes"]
    folder = Path(data_path).expanduser() / split
    mode = "L" if channels == 1 else "RGB"
    images, labels = [], []
    for label, name in enumerate(classes):
        for path in _image_files(folder / name):
            try:
                with Image.open(path) as picture:
                    picture = picture.convert(mode)
                    if picture.size != (image_size, image_size):
                        picture = picture.resize((image_size, image_size), Image.BILINEAR)
                    images.append(np.asarray(picture, dtype=np.uint8).reshape(image_size, image_size, channels))
            except (UnidentifiedImageError, OSError) as error:
                raise SpecError("data_path", f"{path} is not a readable image ({error})") from None
            labels.append(label)
    return np.stack(images), np.asarray(labels, dtype=np.int32)


def _image_files(folder: Path) -> list[Path]:
    """A class folder's images at any depth, as keras.utils.image_dataset_from_directory finds them
    (os.walk without following linked folders; ordered by folder, then name). Unlike Keras, hidden
    files and folders are skipped: macOS's "._x.png" and a notebook's .ipynb_checkpoints/ are no
    images of the class."""
    found = []
    for root, dirs, files in os.walk(folder):
        dirs[:] = [name for name in dirs if not _hidden(name)]
        found += [(root, name) for name in files if name.lower().endswith(IMAGE_SUFFIXES) and not _hidden(name)]
    return [Path(root) / name for root, name in sorted(found) if (Path(root) / name).is_file()]


def _hidden(name: str) -> bool:
    return name.startswith(".")


def _count_images(folder: Path) -> int:
    return len(_image_files(folder))
