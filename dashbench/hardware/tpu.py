"""Which TPU this is, for either backend: generation, chips and devices per chip. No TensorFlow or JAX.

The accelerator type comes from the TPU VM (TPU_ACCELERATOR_TYPE, else the GCE metadata server);
the devices come from whichever runtime the run uses. Its suffix is not a chip count everywhere:
it counts TensorCores on v2, v3, v4 and v5p (v3-8 is 4 chips, v5p-32 is 16) and chips on v5e and
v6e (v5litepod-8 is 8). The runtime shows each v2/v3 core as a device, a v4/v5p chip as one
megacore device, a v5e/v6e chip as one device. So chips = devices seen / devices per chip, checked
against the type; a disagreement goes into the run's environment record, it is not papered over.
"""

from __future__ import annotations

import math
import os
import re
from dataclasses import asdict, dataclass, field
from typing import Mapping, Optional, Sequence

METADATA_URL = "http://metadata.google.internal/computeMetadata/v1/instance/attributes/accelerator-type"
# Off a GCE VM the name does not resolve or the request hangs; a run must not wait on it.
METADATA_TIMEOUT_S = 0.5
UNKNOWN = "TPU"  # the name of a TPU whose generation is not known: no peak, no price


@dataclass(frozen=True)
class Generation:
    name: str  # canonical, as in data/hardware.csv and data/prices.csv
    cores_per_chip: int  # TensorCores
    devices_per_chip: int  # what TensorFlow and JAX list
    suffix_counts: str  # what the type's number counts: "cores" or "chips"


GENERATIONS = {
    "v2": Generation("TPU v2", 2, 2, "cores"),
    "v3": Generation("TPU v3", 2, 2, "cores"),
    "v4": Generation("TPU v4", 2, 1, "cores"),  # megacore: both cores are one device
    "v5p": Generation("TPU v5p", 2, 1, "cores"),
    "v5e": Generation("TPU v5e", 1, 1, "chips"),
    "v6e": Generation("TPU v6e", 1, 1, "chips"),
}
# (major version, variant letters) → generation. Variants as the places spell them: accelerator
# types ("v5litepod-8", "v5p-32", "v6e-8"), GKE ("tpu-v5-lite-podslice", "tpu-v6e-slice"), the
# TPU API ("V5LITE_POD") and JAX's device_kind ("TPU v5 lite", "TPU v5" for v5p, "TPU v6 lite").
_VARIANTS = {
    ("2", ""): "v2",
    ("3", ""): "v3",
    ("4", ""): "v4",
    ("5", "p"): "v5p",
    ("5", ""): "v5p",
    ("5", "lite"): "v5e",
    ("5", "e"): "v5e",
    ("6", "e"): "v6e",
    ("6", "lite"): "v6e",
}
_NAME = re.compile(r"^(?:tpu[\s_-]*)?v(?P<major>\d+)(?P<rest>.*)$")
_COUNT = re.compile(r"-(?P<count>\d+)$")
# Words that say how the slice is packaged, not which chip it is.
_PACKAGING = re.compile(r"podslice|pod|slice|device")


@dataclass(frozen=True)
class AcceleratorType:
    raw: str
    generation: Optional[str]  # a GENERATIONS key, None when not recognised
    suffix: Optional[int]  # the number after the last dash, if any

    @property
    def name(self) -> str:
        return GENERATIONS[self.generation].name if self.generation else UNKNOWN

    @property
    def chips(self) -> Optional[int]:
        """Chips in the slice the type names, or None without a generation or a number."""
        if not self.generation or self.suffix is None:
            return None
        generation = GENERATIONS[self.generation]
        if generation.suffix_counts == "chips":
            return self.suffix
        return max(1, self.suffix // generation.cores_per_chip)


def parse(text: Optional[str]) -> AcceleratorType:
    """'v5p-32' → v5p with 16 chips; 'TPU v5 lite' → v5e (no count); anything else → generation None."""
    raw = (text or "").strip()
    match = _NAME.match(raw.lower())
    if not match:
        return AcceleratorType(raw, None, None)
    rest = match["rest"]
    count = _COUNT.search(rest)
    if count:
        rest = rest[: count.start()]
    variant = _PACKAGING.sub("", re.sub(r"[^a-z]", "", rest))
    return AcceleratorType(raw, _VARIANTS.get((match["major"], variant)), int(count["count"]) if count else None)


def canonical_name(text: Optional[str]) -> str:
    """'v5litepod-8' or 'TPU v5 lite' → 'TPU v5e'; unknown or empty → 'TPU'."""
    return parse(text).name


def evidence() -> Optional[str]:
    """Why this host looks like a TPU VM (device files, TPU environment variables), or None."""
    for path in ("/dev/accel0", "/dev/vfio/0"):
        if os.path.exists(path):
            return path
    if os.environ.get("TPU_ACCELERATOR_TYPE") or os.environ.get("TPU_NAME"):
        return "TPU_ACCELERATOR_TYPE/TPU_NAME set"
    return None


def accelerator_type(
    environ: Optional[Mapping[str, str]] = None, url: str = METADATA_URL, timeout: float = METADATA_TIMEOUT_S
) -> tuple[Optional[str], Optional[str]]:
    """(type, where it came from: "env" | "metadata"), or (None, None) when neither answers."""
    environ = os.environ if environ is None else environ
    value = (environ.get("TPU_ACCELERATOR_TYPE") or "").strip()
    if value:
        return value, "env"
    value = metadata_accelerator_type(url, timeout)
    return (value, "metadata") if value else (None, None)


def metadata_accelerator_type(url: str = METADATA_URL, timeout: float = METADATA_TIMEOUT_S) -> Optional[str]:
    """The VM's accelerator-type attribute, or None when the server is absent, slow or says no."""
    # Imported here: every command imports this module, few ask the metadata server (http.client pulls in ssl and email).
    import http.client
    import urllib.request

    request = urllib.request.Request(url, headers={"Metadata-Flavor": "Google"})
    # The metadata server is link-local: a proxy from the environment would only get in the way.
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))
    try:
        with opener.open(request, timeout=timeout) as response:
            text = response.read(256).decode("utf-8", "replace").strip()
    except (OSError, ValueError, http.client.HTTPException):  # URLError and timeouts are OSErrors
        return None
    return text or None


@dataclass
class Identity:
    """What a run used: the canonical name, chips billed and peaked, and how that was worked out."""

    name: str
    chips: int
    devices_per_chip: int
    devices: int
    accelerator_type: Optional[str] = None
    accelerator_type_source: Optional[str] = None
    type_chips: Optional[int] = None  # chips in the slice the type names
    device_kind: Optional[str] = None
    mismatch: list = field(default_factory=list)  # disagreements between the sources, in words

    def to_env(self) -> dict:
        return asdict(self)


def identify(
    device_kinds: Sequence[str] = (),
    device_count: Optional[int] = None,
    accelerator_type: Optional[str] = None,
    accelerator_type_source: Optional[str] = None,
) -> Identity:
    """Name, chips and devices per chip from what the runtime lists and the VM's accelerator type.

    `device_kinds`: one string per device where the runtime names them (JAX's device_kind);
    TensorFlow names none, so it passes only `device_count`. The runtime's kind wins over the type
    for the generation (it is the hardware talking); the chips are what the devices add up to.
    """
    kinds = sorted({str(kind) for kind in device_kinds})
    devices = device_count if device_count is not None else len(device_kinds)
    typed = parse(accelerator_type)
    seen = parse(kinds[0]) if kinds else AcceleratorType("", None, None)
    mismatch = []
    if len(kinds) > 1:
        mismatch.append(f"the devices are of {len(kinds)} kinds: {', '.join(kinds)}")
    if kinds and seen.generation is None:
        mismatch.append(f"device kind {kinds[0]!r} is not a known TPU generation")
    if accelerator_type and typed.generation is None:
        mismatch.append(f"accelerator type {accelerator_type!r} is not a known TPU generation")
    if seen.generation and typed.generation and seen.generation != typed.generation:
        mismatch.append(f"the devices are {seen.name} but the accelerator type {accelerator_type!r} says {typed.name}")
    generation = seen.generation or typed.generation
    per_chip = GENERATIONS[generation].devices_per_chip if generation else 1
    if generation is None:
        mismatch.append("TPU generation unknown: one device per chip assumed; no peak or price")
    chips = max(1, math.ceil(devices / per_chip))
    if devices % per_chip:
        mismatch.append(f"{devices} devices are not whole chips of {per_chip} devices each")
    type_chips = typed.chips
    if type_chips is not None and generation == typed.generation and type_chips != chips:
        mismatch.append(
            f"{devices} devices make {chips} chips but accelerator type {accelerator_type!r} has {type_chips}"
        )
    return Identity(
        name=GENERATIONS[generation].name if generation else UNKNOWN,
        chips=chips,
        devices_per_chip=per_chip,
        devices=devices,
        accelerator_type=accelerator_type,
        accelerator_type_source=accelerator_type_source if accelerator_type else None,
        type_chips=type_chips,
        device_kind=kinds[0] if kinds else None,
        mismatch=mismatch,
    )


def identify_here(device_kinds: Sequence[str] = (), device_count: Optional[int] = None, **lookup) -> Identity:
    """identify() with the accelerator type looked up on this VM (`lookup`: accelerator_type's arguments)."""
    value, source = accelerator_type(**lookup)
    return identify(device_kinds, device_count, value, source)


def describe_type(found: Optional[str], **lookup) -> dict:
    """The accelerator type and what it implies, for `devices --json`. `found` is evidence()'s answer:
    the metadata server is asked only on a host that looks like a TPU VM, so `devices` stays instant
    elsewhere."""
    value, source = accelerator_type(**lookup) if found else (None, None)
    typed = parse(value)
    return {
        "accelerator_type": value,
        "accelerator_type_source": source,
        "accelerator": typed.name if value else None,
        "chips": typed.chips,
        "devices_per_chip": GENERATIONS[typed.generation].devices_per_chip if typed.generation else None,
    }
