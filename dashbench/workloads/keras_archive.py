"""A `.keras` file's archive, checked before Keras parses it (no framework here): it must be a zip
with a config.json, and the sizes its directory declares must be ones worth unpacking. Keras reads
config.json whole into memory, so a small file that would unpack to a gigabyte (a zip bomb) is refused
from the directory alone, in the time it takes to read a few hundred bytes; the reader stops at the
declared size, so a member cannot unpack to more than its directory says."""

from __future__ import annotations

import zipfile
from pathlib import Path

from dashbench.core.spec import SpecError

JSON_LIMIT = 64 * 2**20  # config.json and metadata.json: a model's config is kilobytes, a large one megabytes
NEEDED = "config.json"


def _mib(size: int) -> str:
    return f"{size / 2**20:,.0f} MiB" if size >= 2**20 else f"{size:,} bytes"


def check(path: Path, capacity: float | None = None) -> None:
    """Refuse (SpecError on `model`) a file that is not a Keras archive, or whose declared sizes are
    past JSON_LIMIT (its JSON members) or `capacity` (any member: more than the host could hold)."""
    name = Path(path).name
    not_archive = f"{name} is not a Keras archive (a .keras file is a zip holding config.json)"
    try:
        if Path(path).stat().st_size == 0:
            raise SpecError("model", f"{not_archive}: it is empty")
        with zipfile.ZipFile(path) as archive:
            members = archive.infolist()
    except zipfile.BadZipFile:
        raise SpecError("model", f"{not_archive}: it is truncated or not a zip file") from None
    except OSError as exc:
        raise SpecError("model", f"{name} cannot be read: {exc.strerror or exc}") from None
    sizes = {member.filename: member.file_size for member in members}
    if NEEDED not in sizes:
        raise SpecError("model", f"{not_archive}: it has no {NEEDED}")
    for member, size in sizes.items():
        if member.endswith(".json") and size > JSON_LIMIT:
            raise SpecError(
                "model",
                f"{name}'s {member} would unpack to {_mib(size)}, past the {_mib(JSON_LIMIT)} a model's "
                f"config may take: refused before reading it",
            )
        if capacity is not None and size > capacity:
            raise SpecError(
                "model",
                f"{name}'s {member} would unpack to {_mib(size)}, more than this host's memory "
                f"({_mib(int(capacity))}): refused before reading it",
            )
