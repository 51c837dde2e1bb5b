"""Packaging beside pyproject.toml: the folders server/ and tools/ are installed as
``context_broker.server`` and ``context_broker.tools`` (no generic top-level names in
site-packages); contextcore/ keeps its own name. Every package (and data folder) under them is
found, so ``pip install .`` carries the same code as the editable install."""

from setuptools import find_namespace_packages, setup

MAPPED = {"context_broker.server": "server", "context_broker.tools": "tools"}
SKIP = ["*__pycache__*"]


def _packages() -> list[str]:
    found = find_namespace_packages(include=["contextcore", "contextcore.*"], exclude=SKIP)
    for name, folder in MAPPED.items():
        found.append(name)
        found += [f"{name}.{sub}" for sub in find_namespace_packages(where=folder, exclude=SKIP)]
    return found


setup(packages=_packages(), package_dir=dict(MAPPED))
