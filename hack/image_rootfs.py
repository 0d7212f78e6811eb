"""The installer image's root filesystem, assembled from the Dockerfile's build stage (Debian bookworm) into a directory
that the final stage copies onto an empty image.

    python3 hack/image_rootfs.py ROOTFS

Only what the installer runs goes in, at the paths it has in the build stage: the Python interpreter and its standard
library (without its tests, IDLE, Tk, lib2to3, ensurepip, distutils and the modules that need libraries the installer
never loads: curses, dbm, readline, nis), the engine's virtualenv, jq (shell-operator runs it for the bindings'
jqFilter), env (the hook's ``#!/usr/bin/env python3``), ls and cat (KubeKey's ``kubectl exec`` into the pod), the
C.UTF-8 locale, the CA bundle, and every shared library these load (ldd), each symlink on the way kept as a symlink.
No shell, no package manager, no file with a setuid or setgid bit. The Python files are compiled once more, as
unchecked-hash pycs (valid whatever the copied files' times), since the read-only image can write none.
``/etc/passwd`` and ``/etc/group`` name root and the installer's user (1002).
"""

from __future__ import annotations

import compileall
import os
import py_compile
import re
import shutil
import stat
import subprocess
import sys
from pathlib import Path

PYTHON = "/usr/bin/python3.11"
STDLIB = "/usr/lib/python3.11"
VENV = "/opt/ks-installer/venv"
#: LANG=C.UTF-8: Ansible refuses to start unless the locale loads (glibc ships it as files).
LOCALE = "/usr/lib/locale/C.utf8"
FILES = [
    PYTHON, "/usr/bin/python3",
    "/usr/bin/jq", "/usr/bin/env", "/usr/bin/ls", "/usr/bin/cat",
    "/etc/ssl/certs/ca-certificates.crt", "/usr/lib/ssl/cert.pem", "/usr/lib/ssl/certs",
    "/etc/os-release",
    # glibc loads it itself (not a DT_NEEDED entry) when a thread exits through pthread_exit, as CPython's do at
    # interpreter shutdown.
    "/usr/lib/x86_64-linux-gnu/libgcc_s.so.1",
]
#: Standard library parts the installer never imports (relative to STDLIB; a name matches at any depth).
STDLIB_SKIP = {"test", "tests", "idle_test", "idlelib", "tkinter", "turtledemo", "turtle.py", "lib2to3", "ensurepip",
               "distutils", "pydoc_data", "venv", "curses", "dbm", "sqlite3", "config-3.11-x86_64-linux-gnu",
               "sitecustomize.py", "EXTERNALLY-MANAGED", "__pycache__"}
#: Extension modules that are tests or need libraries left out (readline, ncurses, gdbm/bdb, nis, sqlite).
DYNLOAD_SKIP = re.compile(r"^(_test\w*|_ctypes_test|_xxtestfuzz|xxlimited\w*|_curses\w*|_dbm|_gdbm|readline|nis"
                          r"|_sqlite3|ossaudiodev|audioop|_xxsubinterpreters)\.")
#: In the virtualenv: its shell activation scripts, Ansible's test tooling, the packages' test suites (``tests``;
#: a directory ``test`` may be code: Ansible's Jinja test plugins).
VENV_SKIP = {"__pycache__", "activate", "activate.csh", "activate.fish", "Activate.ps1", "ansible-test",
             "ansible_test", "tests"}
PASSWD = ("root:x:0:0:root:/root:/usr/sbin/nologin\n"
          "kubesphere:x:1002:1002:ks-installer:/home/kubesphere:/usr/sbin/nologin\n"
          "nobody:x:65534:65534:nobody:/nonexistent:/usr/sbin/nologin\n")
GROUP = "root:x:0:\nkubesphere:x:1002:\nnogroup:x:65534:\n"
NSSWITCH = "passwd: files\ngroup: files\nhosts: files dns\n"
LIB_DIRS = ("/usr/lib/x86_64-linux-gnu", "/usr/lib")


class Rootfs:
    """Copies paths of this system into ``root`` at the same place, symlinks and symlinked directories included."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.done: set[str] = set()

    def dest(self, path: str) -> Path:
        return self.root / path.lstrip("/")

    @staticmethod
    def link(src: str, dest: Path) -> str:
        """Make ``dest`` the symlink ``src`` is (unless there); the path it points at."""
        target = os.readlink(src)
        if not os.path.lexists(dest):
            os.symlink(target, dest)
        return os.path.normpath(os.path.join(os.path.dirname(src), target))

    def directory(self, path: str) -> str:
        """Make ``path``'s directories in the rootfs, symlinked ones as symlinks; its real path here."""
        if path == "/":
            return "/"
        parent, name = os.path.split(path)
        src = os.path.join(self.directory(parent), name)
        dest = self.dest(src)
        if os.path.islink(src):
            return self.directory(self.link(src, dest))
        if not dest.exists():
            dest.mkdir(mode=0o755)
        return src

    def add(self, path: str) -> None:
        """Copy a file or symlink (and what it points at), keeping its mode less any setuid/setgid bit."""
        if path in self.done:
            return
        self.done.add(path)
        parent, name = os.path.split(path)
        src = os.path.join(self.directory(parent), name)
        dest = self.dest(src)
        if os.path.islink(src):
            self.add(self.link(src, dest))
        elif os.path.isdir(src):
            self.directory(src)
        else:
            shutil.copy2(src, dest)
            dest.chmod(stat.S_IMODE(os.stat(src).st_mode) & ~(stat.S_ISUID | stat.S_ISGID))

    def tree(self, top: str, skip: set[str], skip_file: re.Pattern[str] | None = None) -> None:
        """Every file under ``top`` but the names in ``skip`` (at any depth) and the files ``skip_file`` matches."""
        for dirpath, dirnames, filenames in os.walk(top):
            dirnames[:] = [d for d in dirnames if d not in skip and not os.path.islink(os.path.join(dirpath, d))]
            self.directory(dirpath)
            links = [d for d in os.listdir(dirpath) if os.path.islink(os.path.join(dirpath, d))]
            for name in sorted({*filenames, *links}):
                if name in skip or name.endswith((".pyc", ".pyo")) or (skip_file and skip_file.match(name)):
                    continue
                self.add(os.path.join(dirpath, name))

    def elf_files(self) -> list[Path]:
        out = []
        for path in self.root.rglob("*"):
            if path.is_file() and not path.is_symlink():
                with path.open("rb") as f:
                    if f.read(4) == b"\x7fELF":
                        out.append(path)
        return out

    def add_libraries(self) -> None:
        """Every shared library that an ELF file in the rootfs loads (ldd gives the whole closure)."""
        for path in self.elf_files():
            proc = subprocess.run(["ldd", str(path)], capture_output=True, text=True, check=False)
            if proc.returncode:
                continue  # statically linked
            for line in proc.stdout.splitlines():
                found = re.search(r"(?:=>\s*)?(/\S+)\s+\(0x", line)
                if "not found" in line:
                    raise SystemExit(f"{path}: {line.strip()}")
                if found:
                    self.add(found.group(1))


def compile_python(root: Path, dirs: list[str]) -> None:
    """Compile the rootfs' Python files as they will be imported there (their paths in the image)."""
    for top in dirs:
        ok = compileall.compile_dir(root / top.lstrip("/"), quiet=2, workers=0, stripdir=str(root), prependdir="/",
                                    invalidation_mode=py_compile.PycInvalidationMode.UNCHECKED_HASH)
        if not ok:
            raise SystemExit(f"compiling {top} failed")


def write_etc(root: Path) -> None:
    for name, text in (("passwd", PASSWD), ("group", GROUP), ("nsswitch.conf", NSSWITCH),
                       ("ld.so.conf", "".join(f"{d}\n" for d in LIB_DIRS))):
        (root / "etc" / name).write_text(text)
        (root / "etc" / name).chmod(0o644)
    subprocess.run(["ldconfig", "-r", str(root)], check=True)


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    root = Path(argv[1])
    root.mkdir(parents=True, exist_ok=True)
    for link in ("bin", "lib", "lib64", "sbin"):  # bookworm's merged /usr
        (root / "usr" / link).mkdir(parents=True, exist_ok=True)
        if not (root / link).is_symlink():
            (root / link).symlink_to(f"usr/{link}")
    fs = Rootfs(root)
    for path in FILES:
        fs.add(path)
    fs.tree(STDLIB, STDLIB_SKIP | {"lib-dynload"})
    fs.tree(f"{STDLIB}/lib-dynload", set(), DYNLOAD_SKIP)
    fs.tree(VENV, VENV_SKIP)
    fs.tree(LOCALE, set())
    fs.add_libraries()
    (root / "etc").mkdir(exist_ok=True)
    write_etc(root)
    (root / "tmp").mkdir(mode=0o1777, exist_ok=True)
    (root / "tmp").chmod(0o1777)
    compile_python(root, [STDLIB, VENV])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
