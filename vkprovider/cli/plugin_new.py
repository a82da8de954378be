"""``vkprovider plugin new NAME``: write a ready adapter package that passes the contract suite.

The package holds an adapter on the adapter kit (``CloudAdapter``: only the cloud's mapping, each
hook's rule in its docstring), a small FastAPI fake backend with test-control endpoints, a contract-suite harness
for it and a pyproject whose entry point registers the adapter and whose pytest settings name
the harness, so ``pip install -e '.[test]' && pytest`` is green before the author writes a line.
The files are templates in ``plugin_template/`` (``string.Template``: ``${name}`` etc.).
"""

from __future__ import annotations

import re
from importlib.resources import files
from pathlib import Path
from string import Template

from vkprovider.errors import ConfigError

NAME = re.compile(r"[a-z][a-z0-9]*(-[a-z0-9]+)*")

#: template file → path in the new package (``{package}`` is the import name)
FILES = {
    "pyproject.toml.tmpl": "pyproject.toml",
    "README.md.tmpl": "README.md",
    "adapter.py.tmpl": "{package}/adapter.py",
    "fake_backend.py.tmpl": "{package}/fake_backend.py",
    "harness.py.tmpl": "tests/harness.py",
}


def names(name: str) -> dict[str, str]:
    """The spellings of ``name`` the templates use."""
    if not NAME.fullmatch(name):
        raise ConfigError(f"plugin name {name!r}: use lower-case letters, digits and dashes (e.g. acme-gpu)")
    package = "vkprovider_" + name.replace("-", "_")
    return {
        "name": name,
        "title": name,
        "dist": f"vkprovider-{name}",
        "package": package,
        "cls": "".join(part.capitalize() for part in name.split("-")) + "Provider",
    }


def generate(name: str, out: Path) -> list[Path]:
    """Write the package for ``name`` into ``out`` (created; it must not hold anything yet)."""
    values = names(name)
    if out.exists() and any(out.iterdir()):
        raise ConfigError(f"--out {out}: directory is not empty; pick a new one")
    templates = files("vkprovider.cli").joinpath("plugin_template")
    written = []
    for template, target in FILES.items():
        path = out / target.format(package=values["package"])
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(Template(templates.joinpath(template).read_text()).substitute(values))
        written.append(path)
    package_dir = out / values["package"]
    (package_dir / "__init__.py").write_text(f'"""{values["title"]} provider adapter for vkprovider."""\n')
    (package_dir / "py.typed").write_text("")
    return [*written, package_dir / "__init__.py", package_dir / "py.typed"]
