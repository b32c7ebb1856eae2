"""The spec form of sensors: {"type": <a sensors class>, <constructor argument>: value, ...}, the
JSON objects of `sparsedyn estimate`'s spec (estimation/logs.py) and of stored estimation plans
(estimation/storage.py), with the type checks that name the entry and argument at fault."""
from __future__ import annotations

import inspect

import numpy as np

from .. import sensors as S

SPEC_SENSORS = ("JointAccelerations", "JointTorques", "UnactuatedBase", "ExternalWrench",
                "ForceTorque", "LoadCells", "ZeroTangentialForce", "Accelerometer", "Gyroscope",
                "DeclaredForceTorque", "AngularAccelerometer")


def expect(value, types, where, what):
    if not isinstance(value, types):
        raise ValueError(f"{where}: expected {what}, got {value!r:.60}")


def expect_strings(value, where):
    expect(value, (list, tuple), where, "a list of names")
    for k, v in enumerate(value):
        expect(v, str, f"{where}[{k}]", "a name (string)")


def check_sensor(item, where):
    """A sensor entry: a known type and exactly its constructor's arguments, of the right types."""
    expect(item, dict, where, 'an object {"type": ..., <argument>: ...}')
    kind = item.get("type")
    if kind not in SPEC_SENSORS:
        raise ValueError(f"{where}: unknown type {kind!r} (known: {', '.join(SPEC_SENSORS)})")
    params = dict(inspect.signature(getattr(S, kind)).parameters)
    unknown = [k for k in item if k != "type" and k not in params]
    if unknown:
        raise ValueError(f"{where}: {kind} takes no argument(s) {unknown} (it takes "
                         f"{', '.join(params) or 'none'})")
    missing = [k for k, p in params.items() if p.default is p.empty and k not in item]
    if missing:
        raise ValueError(f"{where}: {kind} needs {', '.join(repr(k) for k in missing)}")
    for key, value in item.items():
        if key == "type" or (value is None and params[key].default is None):
            continue
        at = f"{where}[{key!r}]"
        if key == "placement":
            if not is_numbers(value, (4, 4)):
                raise ValueError(f"{at}: expected a 4x4 matrix (4 lists of 4 numbers) or null")
        elif key == "sign":
            if value not in (1, -1) or isinstance(value, bool):
                raise ValueError(f"{at}: expected 1 or -1")
        elif isinstance(params[key].default, bool):
            expect(value, bool, at, "true or false")
        elif key == "joints":
            expect_strings(value, at)
        else:
            expect(value, str, at, "a name (string)")


def is_numbers(value, shape=None):
    """Is `value` a number or a list of numbers (of `shape` if given; booleans are not)?"""
    try:
        arr = np.asarray(value)
    except ValueError:               # ragged lists
        return False
    return arr.dtype.kind in "iuf" and (arr.ndim <= 1 if shape is None else arr.shape == shape)


def sensors_from_specs(items):
    """Sensor objects of spec entries {"type": ..., <constructor argument>: ...} (checked)."""
    sensors = []
    for k, item in enumerate(items):
        check_sensor(item, f"spec['sensors'][{k}]")
        item = dict(item)
        kind = item.pop("type")
        if item.get("placement") is not None:
            item["placement"] = np.asarray(item["placement"], dtype=float)
        sensors.append(getattr(S, kind)(**item))
    return sensors


def sensor_specs(sensors):
    """The spec entries of sensor objects (their constructor arguments, read back from the
    attributes of the same names): sensors_from_specs(sensor_specs(s)) rebuilds them.
    NotImplementedError names a sensor whose arguments are not all kept."""
    out = []
    for s in sensors:
        kind = type(s).__name__
        if kind not in SPEC_SENSORS:
            raise NotImplementedError(f"sensor {s.name!r}: {kind} has no spec form")
        item = {"type": kind}
        for key in inspect.signature(type(s)).parameters:
            if not hasattr(s, key):
                raise NotImplementedError(f"sensor {s.name!r}: {kind} does not keep its "
                                          f"argument {key!r}")
            value = getattr(s, key)
            if isinstance(value, np.ndarray):
                value = value.tolist()
            elif isinstance(value, (list, tuple)):
                value = list(value)
            item[key] = value
        out.append(item)
    return out
