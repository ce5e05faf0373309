"""The template-free search (as Ansor): DAG analysis (``dag.py``), sketch rules
(``sketch.py``), realizing a sketch into a schedule (``realize.py``), evolution under the
cost model (``evolution.py``, ``policy.py``), the task (``task.py``: ``SearchTask``) and the
gradient task scheduler (``scheduler.py``)."""
