"""Robots and problems by the names the command line, the benchmark and log specs use: a URDF
or MJCF (MuJoCo) path or an embedded model (`humanoid`, `hand`, `chainN`), `id` / `fd`; user
mistakes raise CommandError (one line, exit code 2 on the command line)."""
from __future__ import annotations

import argparse
import os

EMBEDDED = ("humanoid", "hand")
PROBLEMS = {"id": "inverse_dynamics", "fd": "forward_dynamics"}


class CommandError(ValueError):
    """A user mistake on the command line (reported as one line, exit code 2)."""


def is_embedded(spec):
    """Is `spec` the name of an embedded model (humanoid, hand, chainN)?"""
    return spec in EMBEDDED or (spec.startswith("chain") and spec[5:].isdigit())


def is_mjcf(path):
    """Is the file at `path` an MJCF model (root element <mujoco>, or a compiled .mjb), whatever
    its extension? A URDF (<robot>) or unreadable XML is not (load_urdf then names the error)."""
    import xml.etree.ElementTree as ET
    if str(path).endswith(".mjb"):
        return True
    try:
        for _, elem in ET.iterparse(path, events=("start",)):
            return elem.tag == "mujoco"
    except (ET.ParseError, UnicodeDecodeError, OSError):
        return False
    return False


def load_robot(spec, floating_base=None, what="robot"):
    """URDF or MJCF path or embedded model name -> Model. floating_base None: the model's default
    (humanoid floating, everything else fixed; an MJCF model as its file says: floating when its
    root body has a free joint, which --floating-base/--fixed-base cannot change); chainN has no
    floating-base variant (refused). `what` names the argument in errors (a missing file, a
    directory, a plan file, not text)."""
    from . import models
    from .model import load_urdf
    if spec == "humanoid":
        return models.humanoid(floating_base=True if floating_base is None else floating_base)
    if spec == "hand":
        return load_urdf(models.HAND_URDF, floating_base=bool(floating_base))
    if is_embedded(spec):
        if floating_base:
            raise CommandError(f"{what} {spec!r}: an embedded chain has no floating-base "
                               f"variant (write it as a URDF to float it)")
        return models.serial_chain(int(spec[5:]))
    if not os.path.exists(spec):
        raise CommandError(f"{what} {spec!r}: no such URDF or MJCF file (or embedded model: "
                           f"{', '.join(EMBEDDED)}, chainN)")
    if os.path.isdir(spec):
        raise CommandError(f"{what} {spec!r}: is a directory, not a URDF file")
    with open(spec, "rb") as fh:
        head = fh.read(4)
    if head.startswith(b"PK"):
        raise CommandError(f"{what} {spec!r}: is a zip archive (a saved plan?), not a URDF file")
    if is_mjcf(spec):
        return _load_mjcf(spec, floating_base, what)
    try:
        return load_urdf(spec, floating_base=bool(floating_base))
    except UnicodeDecodeError as exc:
        raise CommandError(f"{what} {spec!r}: not a URDF file (not UTF-8 text: byte "
                           f"0x{exc.object[exc.start]:02x} at offset {exc.start})") from None


def _load_mjcf(spec, floating_base, what):
    from .model import load_mjcf
    model = load_mjcf(spec)
    if floating_base is not None and bool(floating_base) != model.floating_base:
        # the file's <freejoint> decides; welding or freeing its root here would give a model
        # whose q no longer matches MuJoCo's qpos
        flag = "--fixed-base" if model.floating_base else "--floating-base"
        has = "has" if model.floating_base else "has no"
        raise CommandError(f"{what} {spec!r}: the MJCF model {has} a free joint at its root, "
                           f"so {flag} does not apply (its base is as the file says)")
    return model


def make_problem(model, name, f_ext_links=()):
    from .problems import forward_dynamics, inverse_dynamics
    if name not in PROBLEMS:
        raise CommandError(f"--problem {name!r}: expected one of {', '.join(PROBLEMS)}")
    make = inverse_dynamics if name == "id" else forward_dynamics
    return make(model, f_ext=list(f_ext_links) or False)


def positive_int(text):
    """argparse type of counts (--batch, --repeat, --batch-size): a positive integer."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value
