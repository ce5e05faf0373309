"""pyproject.toml lists every sub-package: a package missing from its explicit list is
silently left out of a regular install (`pip install .`), which an editable install hides."""
from __future__ import annotations

from pathlib import Path

import tomllib

REPO = Path(__file__).resolve().parents[1]


def test_every_package_folder_is_in_pyproject():
    tool = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    folder_of = {name: REPO / folder for name, folder in tool["package-dir"].items()}
    listed = set(tool["packages"])
    found = {".".join((name, *init.parent.relative_to(root).parts))
             for name, root in folder_of.items() for init in root.rglob("__init__.py")}
    assert found - listed == set(), f"add to pyproject's packages: {sorted(found - listed)}"
