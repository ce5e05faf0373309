"""The command line, the only part of tvmlite that imports everything: ``commands.py``
(the commands and ``main``), ``args.py`` (argument parsing), ``tune.py`` (tune and its
summary), ``compare.py`` (templated against template-free), ``progress.py`` (the bar)."""
from __future__ import annotations

from tvmlite.cli.commands import main

__all__ = ["main"]
