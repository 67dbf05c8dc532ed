"""The ApplicationMaster: one per job, on YARN (skein's master container) or on this machine.

It starts one executor per task through the backend's :class:`~.containers.Containers`, waits
for the whole gang, hands every task its cluster spec, watches the tasks and restarts them by
the job's policy. The backends' entry points (``backends/<name>/am_main.py``) run it through
:func:`.process.run_am`.
"""
