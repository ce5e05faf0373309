"""The cost model both searches share: loop-nest features (``features.py``) and XGBoost on
them (``cost_model.py``)."""
