"""The template-free search (as Ansor): DAG analysis (``dag.py``), sketch rules
(``sketch.py``), evolution under the cost model (``evolution.py``, ``policy.py``), the task
(``task.py``: ``SearchTask``) and the gradient task scheduler (``scheduler.py``)."""
