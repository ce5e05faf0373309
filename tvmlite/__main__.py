"""``tvmlite`` and ``python -m tvmlite``: the command line (see tvmlite.cli)."""
from __future__ import annotations

import sys


def main() -> int:
    """Console-script entry point: run the command named in sys.argv."""
    from tvmlite.cli.commands import main as run
    return run(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(main())
