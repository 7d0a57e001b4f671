"""Build hook: bundles librequestqueue.so and requestqueue.h into the package.

By default the library is built from the library's sources with
``RQ_STATIC_STDLIB=1 scripts/build-lib release``: the Swift runtime is linked into the library, so
the installed package needs no Swift toolchain at run time. The sources are those of the checkout
this folder belongs to (``bindings/python/../..``) or, in an sdist, the copy the sdist carries in
``librequestqueue/`` (Package.swift, Sources, Tests, the header, scripts/build-lib, LICENSE). The
build needs the Swift toolchain (``swift`` on PATH, or /opt/swift/usr/bin) and libcurl's
development files (``libcurl4-openssl-dev``; installed with apt-get when missing and running as
root). The bundled copy is stripped.

The version and the home page are read from the header (RQ_VERSION_STRING, " * Home page:"),
where they are written once for every package.

Environment variables:
  REQUESTQUEUE_BUNDLE_LIBRARY=/path/librequestqueue.so  bundle this prebuilt library instead
  REQUESTQUEUE_BUNDLE_HEADER=/path/requestqueue.h       the header to bundle (default: the checkout's)
  REQUESTQUEUE_NO_BUNDLE=1                              bundle nothing; at run time the library is
                                                        then found through REQUESTQUEUE_LIBRARY or
                                                        the system loader
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Optional, Tuple

from setuptools import Distribution, setup
from setuptools.command.bdist_wheel import bdist_wheel  # setuptools >= 70.1 (pyproject asks for 77)
from setuptools.command.build_py import build_py
from setuptools.command.sdist import sdist

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SDIST_SOURCES = HERE / "librequestqueue"
SWIFT_FALLBACK = Path("/opt/swift/usr/bin")
# What an sdist carries of the library's source tree (paths relative to the checkout).
SOURCE_FILES = ["Package.swift", "LICENSE", "include/requestqueue.h", "scripts/build-lib"]
SOURCE_DIRS = ["Sources", "Tests"]


class BuildError(RuntimeError):
    pass


def log(message: str) -> None:
    print(f"requestqueue build: {message}", file=sys.stderr, flush=True)


def run(cmd: list, **kwargs) -> subprocess.CompletedProcess:
    log("$ " + " ".join(str(c) for c in cmd))
    return subprocess.run(cmd, check=True, **kwargs)


def ensure_libcurl_dev(env: dict) -> None:
    def present() -> bool:
        return (shutil.which("pkg-config", path=env["PATH"]) is not None
                and subprocess.run(["pkg-config", "--exists", "libcurl"], env=env).returncode == 0)

    if present():
        return
    if hasattr(os, "geteuid") and os.geteuid() == 0 and shutil.which("apt-get"):
        log("libcurl's development files are missing: installing libcurl4-openssl-dev pkg-config")
        apt_env = dict(env, DEBIAN_FRONTEND="noninteractive")
        install = ["apt-get", "install", "-y", "--no-install-recommends", "libcurl4-openssl-dev",
                   "pkg-config"]
        if subprocess.run(install, env=apt_env).returncode != 0:
            run(["apt-get", "update"], env=apt_env)
            run(install, env=apt_env)
        if present():
            return
    raise BuildError("libcurl's development files are needed to build librequestqueue: install "
                     "libcurl4-openssl-dev and pkg-config (Debian/Ubuntu), then retry")


def source_root() -> Optional[Path]:
    """The library's sources: the sdist's copy, else the checkout this folder is part of."""
    for root in (SDIST_SOURCES, ROOT):
        if all((root / f).is_file() for f in SOURCE_FILES):
            return root
    return None


def header_path() -> Path:
    explicit = os.environ.get("REQUESTQUEUE_BUNDLE_HEADER")
    if explicit:
        return Path(explicit)
    root = source_root()
    if root is None:
        raise BuildError(
            f"neither {SDIST_SOURCES} nor {ROOT} holds the librequestqueue sources "
            f"({', '.join(SOURCE_FILES)}). Install from a checkout (pip install ./bindings/python) "
            "or from the sdist, or set REQUESTQUEUE_BUNDLE_HEADER to requestqueue.h.")
    return root / "include" / "requestqueue.h"


def header_about() -> Tuple[str, str]:
    """(version, home page) as the header writes them."""
    text = header_path().read_text(encoding="utf-8")
    version = re.search(r'^#define RQ_VERSION_STRING "([0-9]+\.[0-9]+\.[0-9]+)"$', text, re.M)
    homepage = re.search(r"^ \* Home page: (\S+)$", text, re.M)
    if not version or not homepage:
        raise BuildError(f"{header_path()}: no RQ_VERSION_STRING or ' * Home page:' line")
    return version.group(1), homepage.group(1)


def build_library() -> Path:
    root = source_root()
    if root is None:
        raise BuildError(
            f"cannot build librequestqueue: neither {SDIST_SOURCES} nor {ROOT} holds its sources "
            f"({', '.join(SOURCE_FILES)}). Install from a checkout (pip install ./bindings/python) "
            "or from the sdist, or set REQUESTQUEUE_BUNDLE_LIBRARY to a built librequestqueue.so, "
            "or REQUESTQUEUE_NO_BUNDLE=1 to use a library installed on the system.")
    script = root / "scripts" / "build-lib"
    env = dict(os.environ, RQ_STATIC_STDLIB="1")
    if shutil.which("swift", path=env.get("PATH")) is None:
        if (SWIFT_FALLBACK / "swift").exists():
            env["PATH"] = f"{env.get('PATH', '')}{os.pathsep}{SWIFT_FALLBACK}"
        else:
            raise BuildError("the Swift toolchain is needed to build librequestqueue: 'swift' is not "
                             f"on PATH nor in {SWIFT_FALLBACK}")
    ensure_libcurl_dev(env)
    log("building librequestqueue with the Swift runtime linked statically (takes a few minutes)")
    result = run(["bash", str(script), "release"], env=env, cwd=root, stdout=subprocess.PIPE, text=True)
    lines = [line for line in result.stdout.splitlines() if line.strip()]
    if not lines:
        raise BuildError("scripts/build-lib printed no library folder")
    library = Path(lines[-1].strip()) / "librequestqueue.so"
    if not library.exists():
        raise BuildError(f"scripts/build-lib did not produce {library}")
    return library


def check_static_runtime(library: Path) -> None:
    """The bundled library must not need the toolchain's Swift runtime."""
    readelf = shutil.which("readelf")
    if readelf is None:
        log("readelf not found: not checking that the Swift runtime is linked statically")
        return
    dynamic = subprocess.run([readelf, "-d", str(library)], stdout=subprocess.PIPE, text=True,
                             check=True).stdout
    needed = [line.split("[", 1)[1].rstrip("]") for line in dynamic.splitlines()
              if "(NEEDED)" in line and "[" in line]
    swift = [name for name in needed if name.startswith(("libswift", "libdispatch", "libFoundation",
                                                         "libBlocksRuntime"))]
    if swift:
        raise BuildError(f"{library} needs the Swift runtime ({', '.join(swift)}); it must be built "
                         "with RQ_STATIC_STDLIB=1")
    log(f"{library.name} needs only: {', '.join(needed)}")


def strip(library: Path) -> None:
    """Drops the symbol table and debug sections (10 MB to 6 MB); the rq_* exports stay."""
    tool = shutil.which("strip")
    if tool is None:
        log(f"strip not found (binutils): {library.name} is bundled unstripped")
        return
    run([tool, "--strip-all", str(library)])


def bundle(target: Path) -> None:
    if os.environ.get("REQUESTQUEUE_NO_BUNDLE") == "1":
        log("REQUESTQUEUE_NO_BUNDLE=1: bundling no library")
        return
    prebuilt = os.environ.get("REQUESTQUEUE_BUNDLE_LIBRARY")
    library = Path(prebuilt) if prebuilt else build_library()
    if not library.exists():
        raise BuildError(f"REQUESTQUEUE_BUNDLE_LIBRARY: {library} does not exist")
    header = header_path()
    if not header.exists():
        raise BuildError(f"the header {header} does not exist (set REQUESTQUEUE_BUNDLE_HEADER)")
    check_static_runtime(library)
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(library.resolve(), target / "librequestqueue.so")
    os.chmod(target / "librequestqueue.so", 0o755)
    strip(target / "librequestqueue.so")
    shutil.copyfile(header, target / "requestqueue.h")
    log(f"bundled {library.resolve()} and {header} into {target}")


class BuildPyWithLibrary(build_py):
    def run(self) -> None:
        super().run()
        if getattr(self, "editable_mode", False):
            target = HERE / "src" / "requestqueue" / "_lib"
        else:
            target = Path(self.build_lib) / "requestqueue" / "_lib"
        try:
            bundle(target)
        except (BuildError, subprocess.CalledProcessError) as exc:
            raise SystemExit(f"requestqueue build: error: {exc}") from None


class SdistWithSources(sdist):
    """The sdist carries the library's sources, so that it builds a working install by itself."""

    def make_release_tree(self, base_dir: str, files: list) -> None:
        super().make_release_tree(base_dir, files)
        root = source_root()
        if root is None:
            raise SystemExit(f"requestqueue build: error: no librequestqueue sources to put in the "
                             f"sdist (neither {SDIST_SOURCES} nor {ROOT} holds them)")
        target = Path(base_dir) / SDIST_SOURCES.name
        ignore = shutil.ignore_patterns("__pycache__", "*.pyc", ".build*")
        for name in SOURCE_DIRS:
            shutil.copytree(root / name, target / name, ignore=ignore)
        for name in SOURCE_FILES:
            (target / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(root / name, target / name)
        log(f"copied the librequestqueue sources of {root} into {target}")


class BinaryDistribution(Distribution):
    """The package carries a Linux shared library: it installs into platlib (never purelib), as
    auditwheel requires. No Python extension is built."""

    def has_ext_modules(self) -> bool:
        return True


class PlatformWheel(bdist_wheel):
    """Built for one platform but for every Python 3 (the library is loaded with cffi's ABI mode):
    py3-none-<platform>, which auditwheel then turns into the manylinux tag the library earns."""

    def get_tag(self):  # type: ignore[no-untyped-def]
        _, _, platform = super().get_tag()
        return "py3", "none", platform


try:
    VERSION, HOMEPAGE = header_about()
except (BuildError, OSError) as exc:
    raise SystemExit(f"requestqueue build: error: {exc}") from None

setup(version=VERSION, project_urls={"Homepage": HOMEPAGE}, distclass=BinaryDistribution,
      cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel, "sdist": SdistWithSources})
