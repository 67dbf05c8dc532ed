"""A sweep's ApplicationMaster: the search (``search.py``, Optuna's ask/tell), the pool of trial
containers (``pool.py``), the trials on them (``trials.py``), their records and report."""
