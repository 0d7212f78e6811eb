"""What the warm engine's code is: a digest of the installer package's files (path, size, modification time) and of
the import path's package directories (``site-packages``: a package installed or removed changes its time).

A warm engine serves a run only while the stamp it took before its imports is the one of the files on disk: an edit
of the installer's code (a new image is a new pod; the demo and a checkout edit it in place) makes the next hook run
the engine itself and start a new warm engine."""

from __future__ import annotations

import hashlib
import os
import sys
from collections.abc import Iterator

import installer

PACKAGE = os.path.dirname(os.path.abspath(installer.__file__))


def _files(root: str) -> Iterator[tuple[str, int, int]]:
    """Path, size and modification time of each file under ``root``, ``__pycache__`` left out."""
    with os.scandir(root) as entries:
        for entry in entries:
            if entry.is_dir(follow_symlinks=False):
                if entry.name != "__pycache__":
                    yield from _files(entry.path)
            else:
                st = entry.stat()
                yield entry.path, st.st_size, st.st_mtime_ns


def package_dirs(path: list[str]) -> list[str]:
    """The entries of ``path`` that hold installed packages (not the working directory, whose time any file written
    there changes)."""
    return [entry for entry in path if os.path.basename(entry.rstrip(os.sep)) in ("site-packages", "dist-packages")]


def code_stamp(package: str = PACKAGE, path: list[str] | None = None) -> str:
    """The digest of ``package``'s files and of the package directories on ``path`` (default ``sys.path``)."""
    digest = hashlib.sha256()
    for name, size, mtime in sorted(_files(package)):
        digest.update(f"{name}\0{size}\0{mtime}\n".encode("utf-8", "surrogateescape"))
    for entry in package_dirs(sys.path if path is None else path):
        try:
            mtime = os.stat(entry or ".").st_mtime_ns
        except OSError:
            mtime = -1
        digest.update(f"path\0{entry}\0{mtime}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()
