"""Versioned plain-dict (de)serialisation shared by stored plans and factorizations."""
from __future__ import annotations

import numpy as np


def check_format(d, fmt, version):
    """Return `d` as a dict after checking its "format" and "version" entries; ValueError naming
    what is wrong for foreign, corrupt or newer input."""
    try:
        d = dict(d)
    except (TypeError, ValueError):
        raise ValueError(f"d: expected a mapping, got {type(d).__name__}") from None
    if str(np.asarray(d.get("format", ""))) != fmt:
        raise ValueError(f"d: not a {fmt} dictionary (format={d.get('format')!r})")
    if int(np.asarray(d.get("version", -1))) != version:
        raise ValueError(f"d: unsupported version {d.get('version')!r} (expected {version})")
    return d


_KINDS = {"int": ("iu", np.int64), "bool": ("b", bool), "float": ("fiu", float), "str": ("U", str)}


def stored_array(d, key, kind, ndim=1):
    """d[key] as an `ndim`-dimensional array of `kind` ("int" -> int64, "bool", "float"):
    ValueError naming the key otherwise. A stored index of the wrong type is corruption, never
    rounded or wrapped into range."""
    kinds, dtype = _KINDS[kind]
    arr = np.asarray(d[key])
    if arr.dtype.kind not in kinds or arr.ndim != ndim:
        raise ValueError(f"d[{key!r}]: expected a {ndim}-d {kind} array, got "
                         f"{arr.dtype} of shape {arr.shape}")
    if kind == "int" and arr.dtype.kind == "u" and arr.size and arr.max() > np.iinfo(np.int64).max:
        raise ValueError(f"d[{key!r}]: index out of the int64 range")
    return arr.astype(dtype)


def stored_scalar(d, key, kind):
    """d[key] (a plain value or a 0-d array, as a file round trip leaves it) as an int, bool,
    float or str: ValueError naming the key if it has another type."""
    value = stored_array(d, key, kind, ndim=0)
    return _KINDS[kind][1](value.item() if kind != "str" else str(value))


def to_plain(obj, arrays, prefix):
    """JSON manifest of a nested dict/list with the numpy arrays moved into `arrays`."""
    if isinstance(obj, dict):
        return {"__dict__": {str(k): to_plain(v, arrays, f"{prefix}/{k}") for k, v in obj.items()}}
    if isinstance(obj, (list, tuple)):
        return {"__list__": [to_plain(v, arrays, f"{prefix}/{k}") for k, v in enumerate(obj)]}
    if isinstance(obj, np.ndarray):
        arrays[prefix] = obj
        return {"__array__": prefix}
    if isinstance(obj, np.generic):
        return obj.item()
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"cannot store {type(obj).__name__} at {prefix!r} in a plan file")


def from_plain(obj, arrays):
    if isinstance(obj, dict):
        if "__array__" in obj:
            return arrays[obj["__array__"]]
        if "__list__" in obj:
            return [from_plain(v, arrays) for v in obj["__list__"]]
        if "__dict__" in obj:
            return {k: from_plain(v, arrays) for k, v in obj["__dict__"].items()}
        raise ValueError(f"unknown entry {sorted(obj)} in the stored plan")
    return obj
