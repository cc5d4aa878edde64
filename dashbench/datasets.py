"""Real Fashion-MNIST: finding, reading, checking and writing its IDX files. No TensorFlow here:
the catalog checks a run's files before the run exists; the engine builds its tf.data pipeline on top."""

from __future__ import annotations

import gzip
import struct
from pathlib import Path
from typing import Optional

import numpy as np

from dashbench.spec import SpecError

FASHION_FILES = ("train-images-idx3-ubyte", "train-labels-idx1-ubyte")
KERAS_FASHION_CACHE = Path("~/.keras/datasets/fashion-mnist")
FASHION_CLASSES = 10


def fashion_mnist_dir(data_path: Optional[str]) -> Path:
    """The folder holding the Fashion-MNIST training IDX files, or a SpecError saying where to put them."""
    folder = Path(data_path).expanduser() if data_path else KERAS_FASHION_CACHE.expanduser()
    missing = [name for name in FASHION_FILES if _idx_file(folder, name) is None]
    if missing:
        hint = "pass --data-path FOLDER" if not data_path else "check the folder"
        raise SpecError(
            "data_path",
            f"no Fashion-MNIST file {missing[0]}[.gz] in {folder}; {hint}, or fill Keras's cache with "
            "keras.datasets.fashion_mnist.load_data()",
        )
    return folder


def check_fashion_mnist(data_path: Optional[str], classes: int) -> Path:
    """The files' soundness without loading the images: their headers agree, and the (small) label
    file holds class numbers. Run before a run row exists, so a wrong file is an input error."""
    folder = fashion_mnist_dir(data_path)
    image_dims = _idx_dims(_idx_file(folder, FASHION_FILES[0]))
    _check_labels(folder, image_dims, read_idx(_idx_file(folder, FASHION_FILES[1])), classes)
    return folder


def load_fashion_mnist(data_path: Optional[str], classes: int) -> tuple[np.ndarray, np.ndarray]:
    """Training images (N, 28, 28, 1) uint8 and labels (N,) from IDX files, gzipped or not."""
    folder = fashion_mnist_dir(data_path)
    images = read_idx(_idx_file(folder, FASHION_FILES[0]))
    labels = read_idx(_idx_file(folder, FASHION_FILES[1]))
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
        raise SpecError("data_path", f"{path}: header says {dims} ({expected} bytes) but the file has "
                                     f"{path.stat().st_size} bytes (truncated or not this format?)")
    return dims


def _check_labels(folder: Path, image_shape: tuple, labels: np.ndarray, classes: int) -> None:
    if len(image_shape) != 3 or labels.ndim != 1 or image_shape[0] != len(labels):
        raise SpecError("data_path", f"IDX files in {folder} disagree: images {tuple(image_shape)}, "
                                     f"labels {labels.shape}")
    if len(labels) and (labels.min() < 0 or labels.max() >= classes):
        # Caught here, not by the loss op: TF's error would come mid-run, wrapped in a graph trace.
        raise SpecError("data_path", f"labels in {folder} must be class numbers 0–{classes - 1}; found "
                                     f"{int(labels.min())}–{int(labels.max())} (a different dataset's file?)")


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
