"""tvmlite's benchmarks, one package run as ``python -m bench NAME [args]`` from the
repository root (``bench/__main__.py`` lists them). tvmlite itself comes from the install,
never from an edit of the import path; every benchmark writes its results through
``bench/results.py`` (Markdown for people, JSON beside it for programs)."""
