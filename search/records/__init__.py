"""What a tuning leaves behind: workloads and their JSON (``workload.py``,
``compute_json.py``), records and logs (``record.py``, ``logs.py``), and the deployable
kernels rebuilt from them (``deploy.py``: ``search.replay``)."""
