"""Files the library writes: atomically, never over one of its inputs.

Every output (plans, tables, figures, reports, estimates) is written to a temporary file in the
target's directory and moved over the target with os.replace only once it is complete, so an
interrupted or failed write (Ctrl-C, SIGTERM, a full disk) leaves the previous file, or none,
never a truncated one that looks complete; the temporary file is removed on the way out.
"""
from __future__ import annotations

import errno
import os
import secrets
import stat
import zipfile
from contextlib import contextmanager

import numpy as np


def same_file(a, b):
    """Do the paths a and b name the same file (through links, relative paths, hard links)?"""
    try:
        return os.path.samefile(a, b)
    except OSError:       # one of them does not exist (yet): compare where they resolve to
        return os.path.realpath(a) == os.path.realpath(b)


def refuse_overwrite(output, **inputs):
    """ValueError naming the input if `output` is the same file as one of `inputs`
    ({role: path or None})."""
    for role, path in inputs.items():
        if path is not None and same_file(output, path):
            raise ValueError(f"output {os.fspath(output)!r}: the same file as the {role} "
                             f"{os.fspath(path)!r}; refusing to overwrite an input")


def check_output(path):
    """Check, before any work, that `path` can be written: its directory exists and it is not
    itself a directory (OSError naming them). Returns the real path (links resolved)."""
    target = os.path.realpath(os.fspath(path))
    if os.path.isdir(target):
        raise IsADirectoryError(errno.EISDIR, "is a directory", os.fspath(path))
    folder = os.path.dirname(target)
    if not os.path.isdir(folder):
        raise FileNotFoundError(errno.ENOENT, "no such directory", folder)
    return target


@contextmanager
def atomic_path(path):
    """Yield a temporary path next to `path`, with its extension (writers that pick the format
    by extension see the right one); replace `path` by it when the block completes, delete it
    when the block raises (KeyboardInterrupt included). A link is written through: its
    target is replaced. The file gets the permissions of the file it replaces, else the
    umask's."""
    target = check_output(path)
    folder, name = os.path.split(target)
    stem, ext = os.path.splitext(name)
    while True:
        tmp = os.path.join(folder, f".{stem}.{secrets.token_hex(4)}.tmp{ext}")
        try:
            os.close(os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666))
            break
        except FileExistsError:
            continue
    try:
        if os.path.exists(target):
            os.chmod(tmp, stat.S_IMODE(os.stat(target).st_mode))
        yield tmp
        fd = os.open(tmp, os.O_RDONLY)
        try:
            os.fsync(fd)          # the data reach the disk before the name does
        finally:
            os.close(fd)
        os.replace(tmp, target)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError) and exc.errno and exc.filename in (None, tmp):
            # name the file being written, not its temporary (a full disk: ENOSPC)
            raise OSError(exc.errno, exc.strerror or str(exc), os.fspath(path)) from exc
        raise


@contextmanager
def atomic_write(path, mode="wb", **open_args):
    """Open a temporary file for writing (open's mode and keywords) and move it over `path`
    once the block completes (atomic_path)."""
    if not mode.startswith("w"):
        raise ValueError(f"mode: expected a writing mode ('w', 'wb', ...), got {mode!r}")
    with atomic_path(path) as tmp:
        with open(tmp, mode, **open_args) as fh:
            yield fh


def read_npz(path, what=".npz file"):
    """{name: array} of an .npz file (np.savez's layout, no pickles), read whole and checked:
    ValueError "<path>: not a readable <what> (why)" for a missing, foreign or corrupt file.
    Every member's CRC is checked (a flipped bit anywhere in the data is an error, not an
    altered array), and an array header announcing another size than its member holds is
    refused before anything is allocated."""
    fmt = np.lib.format
    try:
        arrays = {}
        with zipfile.ZipFile(path) as zf:
            for info in zf.infolist():
                if not info.filename.endswith(".npy"):
                    raise ValueError(f"member {info.filename!r} is not an .npy array")
                with zf.open(info) as fh:
                    version = fmt.read_magic(fh)
                    if version not in ((1, 0), (2, 0)):
                        raise ValueError(f"member {info.filename!r}: .npy version {version}")
                    read_header = (fmt.read_array_header_1_0 if version == (1, 0)
                                   else fmt.read_array_header_2_0)
                    shape, fortran, dtype = read_header(fh)
                    if dtype.hasobject:
                        raise ValueError(f"member {info.filename!r} holds Python objects")
                    size = int(np.prod(shape, dtype=object)) * dtype.itemsize
                    if info.file_size != fh.tell() + size:
                        raise ValueError(f"member {info.filename!r}: its header announces "
                                         f"{size} bytes of data, the member holds "
                                         f"{info.file_size - fh.tell()}")
                    data = fh.read(size)
                    if len(data) != size or fh.read():   # reading to the end checks the CRC
                        raise ValueError(f"member {info.filename!r} is truncated")
                arr = np.frombuffer(data, dtype=dtype).reshape(shape, order="F" if fortran else "C")
                arrays[info.filename[:-4]] = arr.copy()
        return arrays
    except Exception as exc:      # noqa: BLE001 - whatever the damage, one kind of error
        detail = str(exc) if isinstance(exc, ValueError) and type(exc) is ValueError else \
            f"{type(exc).__name__}: {exc}"
        raise ValueError(f"{os.fspath(path)}: not a readable {what} ({detail})") from None
