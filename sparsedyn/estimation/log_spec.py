"""The spec of `sparsedyn estimate` / estimate_log (a JSON object): read_spec checks it key by
key (an unknown key, a missing one or a wrong type is a ValueError naming it) and SPEC_SCHEMA is
the same contract as a JSON Schema (`sparsedyn estimate --spec-schema` prints it; a test keeps
the two in step: every key read_spec accepts is in the schema and the other way round)."""
from __future__ import annotations

import json
import os

from .spec import SPEC_SENSORS, check_sensor, expect, expect_strings, is_numbers

SPEC_KEYS = ("model", "floating_base", "sensors", "unknown_wrenches", "unactuated_base",
             "covariances", "columns", "units", "time", "contacts", "streams", "accelerations",
             "output", "std")
UNIT_KEYS = ("angles", "time")
#: seconds per unit of the time column (spec "units": {"time": ...})
TIME_UNITS = {"s": 1.0, "ms": 1e-3, "us": 1e-6, "ns": 1e-9}
STREAM_KEYS = ("align",)
ALIGN_MODES = ("last", "linear")
ACCELERATION_KEYS = ("from", "window", "order", "tolerance")

_NAME_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_NUMBERS = {"oneOf": [{"type": "number"}, {"type": "array", "items": {"type": "number"}}]}

#: The spec as a JSON Schema (draft 2020-12); the module docstring of estimation/logs.py says
#: what each key does.
SPEC_SCHEMA = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "title": "sparsedyn estimate spec",
    "type": "object",
    "required": ["model"],
    "additionalProperties": False,
    "properties": {
        "model": {"type": "string", "description": '"humanoid", "hand", "chainN" or a URDF path'},
        "floating_base": {"type": "boolean"},
        "sensors": {"type": "array", "items": {
            "type": "object", "required": ["type"],
            "properties": {"type": {"enum": list(SPEC_SENSORS)}},
            "description": "the sensor class's constructor arguments besides type"}},
        "unknown_wrenches": {"type": "array", "items": {"type": "string"}},
        "unactuated_base": {"type": ["boolean", "null"]},
        "covariances": {"type": "object", "additionalProperties": {"oneOf": [
            _NUMBERS, {"type": "object", "additionalProperties": _NUMBERS}]},
            "description": '{"dynamics", <sensor>, "prior", "prior_mean": variances}'},
        "columns": dict(_NAME_MAP, description="{<input name>: <the log's column>}"),
        "units": {"type": "object", "additionalProperties": False,
                  "properties": {"angles": {"enum": ["rad", "deg"]},
                                 "time": {"enum": list(TIME_UNITS)}}},
        "time": {"type": "string",
                 "description": "the timestamp column (in units.time, default seconds)"},
        "contacts": dict(_NAME_MAP, description="{<unknown wrench link>: <0/1 column>}"),
        "streams": {"type": "object", "description": '{"q" | "v" | <sensor>: {"align": ...}}',
                    "additionalProperties": {
                        "type": "object", "required": ["align"], "additionalProperties": False,
                        "properties": {"align": {"enum": list(ALIGN_MODES)}}}},
        "accelerations": {"type": "object", "required": ["from", "window", "order"],
                          "additionalProperties": False, "properties": {
                              "from": {"const": "velocities"},
                              "window": {"type": "integer", "minimum": 3,
                                         "description": "odd, rows"},
                              "order": {"type": "integer", "minimum": 1},
                              "tolerance": {"type": "number", "exclusiveMinimum": 0,
                                            "description": "of the time step, relative; "
                                                          "default 1e-3"}}},
        "output": {"enum": ["positional", "named"]},
        "std": {"type": "boolean"},
    },
}


def read_spec(spec):
    """The spec (a dict, or the path of a JSON file) checked against the schema of the module
    docstring: ValueError naming the key or the sensor argument that is unknown, missing or of
    the wrong type. Returns a plain dict."""
    if isinstance(spec, (str, os.PathLike)):
        try:
            with open(spec, "r", encoding="utf-8") as fh:
                spec = json.load(fh)
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise ValueError(f"spec: {os.fspath(spec)} is not a JSON file ({exc})") from None
    if not isinstance(spec, dict):
        raise ValueError(f"spec: expected a JSON object, got {type(spec).__name__}")
    unknown = [k for k in spec if k not in SPEC_KEYS]
    if unknown:
        raise ValueError(f"spec: unknown key(s) {unknown} (known: {', '.join(SPEC_KEYS)})")
    if "model" not in spec:
        raise ValueError('spec: missing "model" ("humanoid", "hand", "chainN" or a URDF path)')
    expect(spec["model"], str, "spec['model']", "a string")
    for key in ("floating_base", "unactuated_base"):
        if key in spec and not (spec[key] is None and key == "unactuated_base"):
            expect(spec[key], bool, f"spec[{key!r}]", "true or false")
    expect(spec.get("sensors", []), (list, tuple), "spec['sensors']", "a list")
    for k, item in enumerate(spec.get("sensors", [])):
        check_sensor(item, f"spec['sensors'][{k}]")
    expect_strings(spec.get("unknown_wrenches", []), "spec['unknown_wrenches']")
    if "covariances" in spec:
        _check_covariances(spec["covariances"])
    for key in ("columns", "contacts"):
        expect(spec.get(key, {}), dict, f"spec[{key!r}]", "an object {name: column}")
        for name, col in spec.get(key, {}).items():
            expect(col, str, f"spec[{key!r}][{name!r}]", "a column name (string)")
    units = spec.get("units", {})
    expect(units, dict, "spec['units']", 'an object {"angles": "deg", "time": "ns"}')
    if (set(units) - set(UNIT_KEYS) or units.get("angles", "rad") not in ("rad", "deg")
            or units.get("time", "s") not in TIME_UNITS):
        raise ValueError(f"spec['units']: expected {{\"angles\": \"deg\" or \"rad\", \"time\": "
                         f"{' or '.join(repr(u) for u in TIME_UNITS)}}}, got {units!r}")
    if "time" in spec:
        expect(spec["time"], str, "spec['time']", "a column name (string)")
    elif "time" in units:
        raise ValueError("spec['units']['time']: the spec has no \"time\" column")
    _check_streams(spec)
    _check_accelerations(spec)
    if spec.get("std", False) not in (True, False) or (spec.get("std") and
                                                          spec.get("output") != "named"):
        raise ValueError(f"spec['std']: expected true or false (true needs \"output\": "
                         f"\"named\"), got {spec['std']!r}")
    if spec.get("output", "positional") not in ("positional", "named"):
        raise ValueError(f"spec['output']: expected \"positional\" or \"named\", got "
                         f"{spec['output']!r}")
    return dict(spec)


def _check_streams(spec):
    """{"q" | "v" | <sensor>: {"align": "last" | "linear"}}; linear needs the time column
    (which input names exist is the log reader's to check, it knows the plan)."""
    streams = spec.get("streams", {})
    expect(streams, dict, "spec['streams']", 'an object {<input>: {"align": ...}}')
    for name, item in streams.items():
        at = f"spec['streams'][{name!r}]"
        expect(item, dict, at, '{"align": "last" or "linear"}')
        if set(item) != set(STREAM_KEYS) or item["align"] not in ALIGN_MODES:
            raise ValueError(f"{at}: expected {{\"align\": \"last\" or \"linear\"}}, got {item!r}")
        if item["align"] == "linear" and "time" not in spec:
            raise ValueError(f"{at}: linear alignment interpolates by time: the spec needs "
                             f"\"time\" (the timestamp column)")


def _check_accelerations(spec):
    """{"from": "velocities", "window": odd >= 3, "order": 1..window-1, "tolerance": > 0}."""
    if "accelerations" not in spec:
        return
    acc = spec["accelerations"]
    at = "spec['accelerations']"
    expect(acc, dict, at, '{"from": "velocities", "window": ..., "order": ...}')
    unknown = sorted(set(acc) - set(ACCELERATION_KEYS))
    missing = [k for k in ("from", "window", "order") if k not in acc]
    if unknown or missing:
        raise ValueError(f"{at}: unknown key(s) {unknown}, missing {missing} (keys: "
                         f"{', '.join(ACCELERATION_KEYS)})")
    if acc["from"] != "velocities":
        raise ValueError(f"{at}['from']: expected \"velocities\", got {acc['from']!r}")
    w, order = acc["window"], acc["order"]
    if not (isinstance(w, int) and not isinstance(w, bool) and w >= 3 and w % 2 == 1):
        raise ValueError(f"{at}['window']: expected an odd number of rows >= 3, got {w!r}")
    if not (isinstance(order, int) and not isinstance(order, bool) and 1 <= order < w):
        raise ValueError(f"{at}['order']: expected a polynomial order 1..window-1, got {order!r}")
    tol = acc.get("tolerance", 1e-3)
    if isinstance(tol, bool) or not isinstance(tol, (int, float)) or not tol > 0:
        raise ValueError(f"{at}['tolerance']: expected a positive number, got {tol!r}")
    if "time" not in spec:
        raise ValueError(f"{at}: the derivative needs the time step: the spec needs \"time\" "
                         f"(the timestamp column)")


def _check_covariances(cov):
    """Types only: names and sizes are the estimator's to check (compile_estimation)."""
    expect(cov, dict, "spec['covariances']", 'an object {"dynamics": ..., <sensor>: ...}')
    for key, value in cov.items():
        at = f"spec['covariances'][{key!r}]"
        if key == "prior" and isinstance(value, dict):
            for kind, v in value.items():
                if not is_numbers(v):
                    raise ValueError(f"{at}[{kind!r}]: expected a variance or a list of them")
        elif not is_numbers(value):
            raise ValueError(f"{at}: expected a number or a list of numbers")
