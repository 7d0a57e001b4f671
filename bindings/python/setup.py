"""Build hook: bundles librequestqueue.so and requestqueue.h into the package.

By default the library is built from the source checkout this folder belongs to
(``bindings/python/../..``) with ``RQ_STATIC_STDLIB=1 scripts/build-lib release``: the Swift runtime
is linked into the library, so the installed package needs no Swift toolchain at run time. The
build needs the Swift toolchain (``swift`` on PATH, or /opt/swift/usr/bin) and libcurl's
development files (``libcurl4-openssl-dev``; installed with apt-get when missing and running as
root). The static build takes a few minutes.

Environment variables:
  REQUESTQUEUE_BUNDLE_LIBRARY=/path/librequestqueue.so  bundle this prebuilt library instead
  REQUESTQUEUE_BUNDLE_HEADER=/path/requestqueue.h       the header to bundle (default: the checkout's)
  REQUESTQUEUE_NO_BUNDLE=1                              bundle nothing; at run time the library is
                                                        then found through REQUESTQUEUE_LIBRARY or
                                                        the system loader
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py

try:
    from setuptools.command.bdist_wheel import bdist_wheel
except ImportError:  # setuptools < 70.1
    from wheel.bdist_wheel import bdist_wheel  # type: ignore[no-redef]

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent.parent
SWIFT_FALLBACK = Path("/opt/swift/usr/bin")


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


def build_library() -> Path:
    script = ROOT / "scripts" / "build-lib"
    if not script.exists() or not (ROOT / "Package.swift").exists():
        raise BuildError(
            f"cannot build librequestqueue: {ROOT} is not the requestqueue source checkout "
            f"({script} is missing). Install from a checkout (pip install ./bindings/python), or "
            "set REQUESTQUEUE_BUNDLE_LIBRARY to a built librequestqueue.so, or "
            "REQUESTQUEUE_NO_BUNDLE=1 to use a library installed on the system.")
    env = dict(os.environ, RQ_STATIC_STDLIB="1")
    if shutil.which("swift", path=env.get("PATH")) is None:
        if (SWIFT_FALLBACK / "swift").exists():
            env["PATH"] = f"{env.get('PATH', '')}{os.pathsep}{SWIFT_FALLBACK}"
        else:
            raise BuildError("the Swift toolchain is needed to build librequestqueue: 'swift' is not "
                             f"on PATH nor in {SWIFT_FALLBACK}")
    ensure_libcurl_dev(env)
    log("building librequestqueue with the Swift runtime linked statically (takes a few minutes)")
    result = run([str(script), "release"], env=env, cwd=ROOT, stdout=subprocess.PIPE, text=True)
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


def bundle(target: Path) -> None:
    if os.environ.get("REQUESTQUEUE_NO_BUNDLE") == "1":
        log("REQUESTQUEUE_NO_BUNDLE=1: bundling no library")
        return
    prebuilt = os.environ.get("REQUESTQUEUE_BUNDLE_LIBRARY")
    library = Path(prebuilt) if prebuilt else build_library()
    if not library.exists():
        raise BuildError(f"REQUESTQUEUE_BUNDLE_LIBRARY: {library} does not exist")
    header = Path(os.environ.get("REQUESTQUEUE_BUNDLE_HEADER") or ROOT / "include" / "requestqueue.h")
    if not header.exists():
        raise BuildError(f"the header {header} does not exist (set REQUESTQUEUE_BUNDLE_HEADER)")
    check_static_runtime(library)
    target.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(library.resolve(), target / "librequestqueue.so")
    os.chmod(target / "librequestqueue.so", 0o755)
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


class PlatformWheel(bdist_wheel):
    """The wheel carries a Linux shared library but no Python extension: py3-none-<platform>."""

    def finalize_options(self) -> None:
        super().finalize_options()
        self.root_is_pure = False

    def get_tag(self):  # type: ignore[no-untyped-def]
        _, _, platform = super().get_tag()
        return "py3", "none", platform


setup(cmdclass={"build_py": BuildPyWithLibrary, "bdist_wheel": PlatformWheel})
