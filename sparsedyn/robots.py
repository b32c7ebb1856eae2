"""Robots and problems by the names the command line, the benchmark and log specs use: a URDF
path or an embedded model (`humanoid`, `hand`, `chainN`), `id` / `fd`; user mistakes raise
CommandError (one line, exit code 2 on the command line)."""
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


def load_robot(spec, floating_base=None, what="robot"):
    """URDF path or embedded model name -> Model. floating_base None: the model's default
    (humanoid floating, everything else fixed); chainN has no floating-base variant (refused).
    `what` names the argument in errors (a missing file, a directory, a plan file, not text)."""
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
        raise CommandError(f"{what} {spec!r}: no such URDF file (or embedded model: "
                           f"{', '.join(EMBEDDED)}, chainN)")
    if os.path.isdir(spec):
        raise CommandError(f"{what} {spec!r}: is a directory, not a URDF file")
    with open(spec, "rb") as fh:
        head = fh.read(4)
    if head.startswith(b"PK"):
        raise CommandError(f"{what} {spec!r}: is a zip archive (a saved plan?), not a URDF file")
    try:
        return load_urdf(spec, floating_base=bool(floating_base))
    except UnicodeDecodeError as exc:
        raise CommandError(f"{what} {spec!r}: not a URDF file (not UTF-8 text: byte "
                           f"0x{exc.object[exc.start]:02x} at offset {exc.start})") from None


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
