"""Measuring candidates: what a measurement is (``inputs.py``), compiling them
(``builder.py``), timing them in an isolated process (``runner.py``, ``worker.py``), and
the loop that does both and logs each result (``measurer.py``)."""
