"""The build step pyproject.toml cannot say: the browser page is built into the wheel.

Everything else about the package is in pyproject.toml. Building a wheel (`pip wheel .`,
`python -m build`, `pip install .`, `pipx install .`) runs `npm ci` in web/ at the versions
web/package-lock.json locks and `node web/build.mjs`, which writes
src/pigeonhole/web/assets/; the package data then carries it, so an installed server
needs no Node.js. The sdist holds web/'s sources and lockfile (MANIFEST.in) and builds
the same wheel. An editable install (`pip install -e .`, scripts/setup) skips the step:
scripts/setup builds the page in the checkout itself.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

from setuptools import setup
from setuptools.command.build_py import build_py
from setuptools.errors import SetupError

HERE = Path(__file__).resolve().parent
WEB = HERE / "web"
ASSETS = HERE / "src" / "pigeonhole" / "web" / "assets"


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise SetupError(
            f"building pigeonhole needs {name} (Node.js and npm build the browser page from"
            " web/; Debian: apt-get install nodejs npm); an installed wheel needs neither"
        )
    return found


def build_page() -> None:
    """npm ci (when web/node_modules is older than the lockfile), then web/build.mjs."""
    lock, installed = WEB / "package-lock.json", WEB / "node_modules" / ".package-lock.json"
    node, npm = _tool("node"), _tool("npm")
    fresh = installed.exists() and installed.stat().st_mtime >= lock.stat().st_mtime
    if not fresh or not (WEB / "node_modules" / ".bin" / "esbuild").exists():
        npm_ci = [npm, "ci", "--prefer-offline", "--no-audit", "--no-fund", "--loglevel=error"]
        subprocess.run(npm_ci, cwd=WEB, check=True)
    subprocess.run([node, str(WEB / "build.mjs")], cwd=HERE, check=True)
    if not (ASSETS / "index.html").is_file():
        raise SetupError(f"web/build.mjs left no {ASSETS / 'index.html'}")


class BuildWithPage(build_py):
    """build_py that first builds the browser page (not for an editable install)."""

    def run(self) -> None:
        if not self.editable_mode:
            if (WEB / "build.mjs").is_file():
                build_page()
            elif not (ASSETS / "index.html").is_file():
                raise SetupError("neither web/ to build the page from nor a built page")
        super().run()


setup(cmdclass={"build_py": BuildWithPage})
