"""Measuring candidates: what a measurement is (``inputs.py``) and how one is made, for
every runner (``protocol.py``: ``MeasureConfig``, the reference cache), compiling them
(``builder.py``), timing them in an isolated process (``runner.py``, ``worker.py``) or on
the workers of a Dask cluster (``dask_runner.py``, ``dask_worker.py``), and the loop that
does both and logs each result (``measurer.py``)."""
