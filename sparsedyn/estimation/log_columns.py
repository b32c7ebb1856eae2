"""Where each input of an estimation plan sits among a log's columns (the spec's "columns",
"units", "time", "contacts", "streams" and "accelerations"; estimation/logs.py's docstring), for
estimate_log. Input names: "q/<joint>", "v/<joint>" (one-coordinate joints; "q/<joint>/<k>" for
more), "<sensor>/<k>" ("qdd/<joint>" for JointAccelerations), or the positional "q_<k>",
"v_<k>", "<sensor>_<k>"."""
from __future__ import annotations

import numpy as np

from .log_align import Stream


class LogColumns:
    """Column indices of every input in a flat row of the log, their unit factors, the extra
    columns (time, contact flags), and the derived columns appended after the log's own
    (accelerations from velocities: the JointAccelerations sensor reads them)."""

    def __init__(self, plan, names, source, spec=None):
        model = plan.model
        spec = spec or {}
        self.names, self.width = list(names), len(names)
        self.sensors = [s for s in plan.problem.sensors if s.rows or s.default_reading is None]
        index = {}
        for k, n in enumerate(names):
            index.setdefault(n, []).append(k)
        mapping = dict(spec.get("columns", {}))
        degrees = spec.get("units", {}).get("angles", "rad") == "deg"
        angle_inputs = ("q", "v") + tuple(s.name for s in self.sensors
                                          if type(s).__name__ == "JointAccelerations")
        self.derived = self._derived(plan, spec)
        need = {"q": _coordinate_names(model, "q"), "v": _coordinate_names(model, "v", "v")}
        optional = set()
        for s in self.sensors:
            if s.name in self.derived:
                continue
            need[s.name] = (_coordinate_names(model, s.name, "v") if type(s).__name__ ==
                            "JointAccelerations" else [f"{s.name}/{k}" for k in range(s.size)])
            if s.default_reading is not None:
                optional.add(s.name)
        self.slices, self.scales, missing, twice = {}, {}, [], []
        for key, named in need.items():
            found = []
            for k, name in enumerate(named):
                hits = [index[c] for c in (mapping.get(name), name, f"{key}_{k}") if c in index]
                found.append(hits[0] if hits else [])
                twice += [names[hits[0][0]]] if hits and len(hits[0]) > 1 else []
            if any(not c for c in found):
                if key not in optional:
                    missing += [f"{mapping.get(n, n)} (or {key}_{k})"
                                for k, (n, c) in enumerate(zip(named, found)) if not c]
                continue
            self.slices[key] = np.asarray([c[0] for c in found])
        for key in self.derived:        # d/dt of the v columns, appended in v's order
            self.slices[key] = self.width + np.arange(model.nv)
        for key in self.slices:
            if degrees and key in angle_inputs:
                self.scales[key] = _angle_scale(model, "q" if key == "q" else "v")
        self.extra = {}
        for what, col in ([("time", spec["time"])] if "time" in spec else []) + [
                (("contact", link), col) for link, col in spec.get("contacts", {}).items()]:
            if col not in index:
                missing.append(col)
            else:
                self.extra[what] = index[col][0]
        unknown = sorted(set(spec.get("contacts", {})) - set(plan.problem.unknown_wrenches))
        if unknown:
            raise KeyError(f"spec['contacts']: {unknown} are not unknown wrenches of the "
                           f"problem {list(plan.problem.unknown_wrenches)}")
        if missing:
            raise KeyError(f"{source}: missing columns {missing[:8]}{' ...' if len(missing) > 8 else ''}")
        if twice:
            raise ValueError(f"{source}: columns {twice[:8]} appear more than once")
        self.keys = tuple(self.slices)
        self.streams = self._streams(model, spec)

    @staticmethod
    def _derived(plan, spec):
        """{sensor name: "v"}: the JointAccelerations sensor read from the velocities' derivative
        (spec "accelerations"); it must read the whole qdd."""
        if "accelerations" not in spec:
            return {}
        acc = [s for s in plan.problem.sensors if type(s).__name__ == "JointAccelerations"]
        if not acc:
            raise ValueError("spec['accelerations']: the problem has no JointAccelerations "
                             "sensor to read them")
        for s in acc:
            if s.size != plan.model.nv:
                raise ValueError(f"spec['accelerations']: sensor {s.name!r} reads {s.size} "
                                 f"of the {plan.model.nv} accelerations; derived "
                                 f"accelerations fill a whole qdd only")
        return {s.name: "v" for s in acc}

    def _streams(self, model, spec):
        """log_align.Stream of every entry of spec "streams" (an input read from the log)."""
        out = []
        for name, item in spec.get("streams", {}).items():
            if name not in self.slices or name in self.derived:
                raise KeyError(f"spec['streams'][{name!r}]: not an input read from the log "
                               f"(inputs: {', '.join(k for k in self.slices if k not in self.derived)})")
            quaternions = []
            if name == "q":                 # unit quaternions: renormalised after interpolation
                first = 0
                for j in model.joints:
                    if j.ROTATION == "quaternion":
                        quaternions.append(np.arange(first + j.nq - 4, first + j.nq))
                    first += j.nq
            out.append(Stream(name, self.slices[name], item["align"], quaternions))
        return out

    def split(self, block):
        """(inputs {key: (B, size)} in the plan's units, extras {"time" or ("contact", link):
        (B,)})."""
        data = {k: block[:, c] * self.scales[k] if k in self.scales else block[:, c]
                for k, c in self.slices.items()}
        return data, {k: block[:, c] for k, c in self.extra.items()}

    def used(self):
        """Every column index read."""
        return np.concatenate(list(self.slices.values()) + [
            np.asarray(list(self.extra.values()), dtype=np.int64)]).astype(np.int64)


def _coordinate_names(model, prefix, space="q"):
    """"<prefix>/<joint>" per coordinate of a one-coordinate joint, "<prefix>/<joint>/<k>" for
    the others (q or v layout)."""
    out = []
    for j in model.joints:
        n = j.nq if space == "q" else j.nv
        out += [f"{prefix}/{j.name}"] if n == 1 else [f"{prefix}/{j.name}/{k}" for k in range(n)]
    return out


def _angle_scale(model, space):
    """Per q (or v) coordinate: pi / 180 for an angle (revolute joints), 1 otherwise."""
    out = []
    for j in model.joints:
        n = j.nq if space == "q" else j.nv
        # a one-coordinate rotation's coordinate is its angle (revolute, continuous, helical)
        out += [np.pi / 180.0 if j.ROTATION == "angle" and n == 1 else 1.0] * n
    return np.asarray(out)
