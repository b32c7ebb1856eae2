"""Inverse and forward dynamics as measurement sets on Nori's Newton-Euler system (seed 001).

    inverse dynamics (Sec. IV, eq. 8-10):  measured qdd_i (and fx_i), unknown tau, a, f
    forward dynamics (Sec. V, eq. 15-16):  measured tau_i (and fx_i), unknown qdd, a, f

A Problem is constant data (the model and which blocks are measured); `system()` builds its
NewtonEulerSystem once. `compile(problem)` (plan.py) turns it into a reusable Plan.
"""
from __future__ import annotations

from ..system import NewtonEulerSystem


class Problem:
    """Which variable blocks of D are measured; everything else is solved for.

    name      "inverse_dynamics" or "forward_dynamics"
    given     the public input that fills the joint-space measurements: "qdd" or "tau"
    fx_links  link names carrying an external wrench variable fx (measured: f_ext)
    """

    def __init__(self, model, name, given, fx_links=()):
        self.model = model
        self.name = name
        self.given = given
        self.fx_links = tuple(fx_links)
        self.fx_bodies = tuple(sorted({model.frames[n].body for n in self.fx_links}))
        self.outputs = ("tau",) if given == "qdd" else ("qdd",)
        self._system = None

    @property
    def measured(self):
        """(kind, body) blocks fixed by measurement rows (eq. 8 / 15)."""
        N = self.model.nbodies
        return [(self.given, i) for i in range(N)] + [("fx", i) for i in self.fx_bodies]

    def system(self):
        if self._system is None:
            self._system = NewtonEulerSystem(self.model, self.measured, fx_bodies=self.fx_bodies)
        return self._system

    def describe(self):
        """Plain description (stored in plan files)."""
        return {"name": self.name, "given": self.given, "fx_links": list(self.fx_links)}

    @classmethod
    def from_description(cls, model, d):
        if d.get("name") == "inverse_dynamics":
            return inverse_dynamics(model, f_ext=list(d.get("fx_links", [])))
        if d.get("name") == "forward_dynamics":
            return forward_dynamics(model, f_ext=list(d.get("fx_links", [])))
        raise ValueError(f"unknown problem {d.get('name')!r} (known: inverse_dynamics, forward_dynamics)")

    def __repr__(self):
        fx = f", f_ext on {len(self.fx_links)} links" if self.fx_links else ""
        return f"{self.name}({self.model.name!r}{fx})"


def _fx_links(model, f_ext):
    """f_ext=False: no external wrenches; True: one per body (on its own link); a list of link
    names: those links (frames of merged links allowed; one wrench variable per body)."""
    if f_ext is False or f_ext is None:
        return ()
    if f_ext is True:
        return tuple(model.link_names)
    if isinstance(f_ext, str):
        f_ext = [f_ext]
    links = []
    for name in f_ext:
        if name not in model.frames:
            raise KeyError(f"f_ext: model {model.name!r} has no link named {name!r}")
        if model.frames[name].body < 0:
            raise ValueError(f"f_ext: link {name!r} is welded to the fixed world: a wrench on it "
                             "does not act on the robot")
        links.append(name)
    return tuple(dict.fromkeys(links))


def inverse_dynamics(model, f_ext=False):
    """tau from (q, qd, qdd[, f_ext]) (Nori Sec. IV): measurement rows qdd_i = y, fx_i = y."""
    return Problem(model, "inverse_dynamics", "qdd", _fx_links(model, f_ext))


def forward_dynamics(model, f_ext=False):
    """qdd from (q, qd, tau[, f_ext]) (Nori Sec. V): measurement rows tau_i = y, fx_i = y."""
    return Problem(model, "forward_dynamics", "tau", _fx_links(model, f_ext))
