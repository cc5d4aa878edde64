"""An image folder whose class folders hold subfolders: the images are found at any depth, in the order
and with the extensions keras.utils.image_dataset_from_directory uses, hidden files and folders aside."""

from pathlib import Path

import numpy as np
from PIL import Image

from dashbench.workloads import datasets

SIDE = 6
# class → (path under the class folder, grey level, format): nested, upper-case extensions, every format.
IMAGES = {
    "cat": [("a.png", 10, "PNG"), ("sub/b.gif", 40, "GIF"), ("sub/deeper/c.JPG", 70, "JPEG")],
    "dog": [("2024/x.png", 100, "PNG"), ("2024/y.jpeg", 130, "JPEG"), ("2025/z.bmp", 160, "BMP")],
}
# Not images of a class: hidden (a macOS "._" file that is no image, a notebook's checkpoint folder),
# a text file, and a hidden class folder.
NOT_IMAGES = ["cat/._a.png", "cat/.ipynb_checkpoints/a.png", "dog/notes.txt", ".cache/w.png"]


def make_folder(root: Path) -> Path:
    for split in ("train", "validation"):
        for name, files in IMAGES.items():
            for relative, grey, kind in files:
                path = root / split / name / relative
                path.parent.mkdir(parents=True, exist_ok=True)
                Image.new("L", (SIDE, SIDE), grey).save(path, format=kind)
        for relative in NOT_IMAGES:
            path = root / split / relative
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(b"not an image")
    return root


def test_images_in_nested_subfolders_are_found_as_keras_finds_them(tmp_path):
    import keras

    folder = make_folder(tmp_path / "images")
    layout = datasets.check_image_folder(str(folder))
    assert layout == {"classes": ["cat", "dog"], "train_examples": 6, "validation_examples": 6}
    x, y = datasets.load_image_folder(str(folder), "train", SIDE, 1)
    assert y.tolist() == [0, 0, 0, 1, 1, 1]
    # Each image's own grey level, in Keras's order (by folder, then name); JPEG is lossy by a little.
    greys = [grey for files in IMAGES.values() for _, grey, _ in files]
    assert np.abs(x.reshape(len(y), -1).mean(axis=1) - greys).max() < 3

    found = keras.utils.image_dataset_from_directory(
        str(folder / "train"), image_size=(SIDE, SIDE), shuffle=False, color_mode="grayscale"
    )
    # Keras lists hidden files with an image's extension too (it would fail on "._a.png"); ours skips them.
    theirs = [Path(p).relative_to(folder / "train") for p in found.file_paths]
    theirs = [p for p in theirs if not any(part.startswith(".") for part in p.parts)]
    ours = [Path(name) / relative for name, files in IMAGES.items() for relative, _, _ in files]
    assert theirs == ours and found.class_names == layout["classes"]
    assert [p.relative_to(folder / "train") for p in datasets._image_files(folder / "train" / "cat")] == [
        Path("cat") / relative for relative, _, _ in IMAGES["cat"]
    ]
