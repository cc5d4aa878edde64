"""Every --json output is strict JSON (RFC 8259): a non-finite number, which a stored run or an
imported bundle may hold, is printed as null, never as `Infinity` or `NaN`."""

from __future__ import annotations

import json
import math


def json_safe(value):
    """`value` with each non-finite float (numpy's too) replaced by None."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, dict):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(v) for v in value]
    return value


def dumps(obj, **kwargs) -> str:
    """json.dumps that refuses what is not JSON, after json_safe has made numbers finite or null."""
    return json.dumps(json_safe(obj), allow_nan=False, **kwargs)
