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
