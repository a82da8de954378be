"""Package discovery: the service under ``vkprovider/`` and each adapter under ``providers/<name>/``.

Adapters live in ``providers/<name>/`` (the layout users browse) but import as
``vkprovider_<name>`` so they never shadow third-party packages such as ``kubernetes``.
Everything else is declared in pyproject.toml.
"""

from setuptools import find_packages, setup

packages = find_packages(include=["vkprovider", "vkprovider.*"])
package_dir = {"": "."}
for adapter_pkg in find_packages("providers"):
    top, _, rest = adapter_pkg.partition(".")
    name = f"vkprovider_{top}" + (f".{rest}" if rest else "")
    packages.append(name)
    package_dir[name] = "providers/" + adapter_pkg.replace(".", "/")

setup(packages=packages, package_dir=package_dir)
