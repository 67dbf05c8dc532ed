"""The YARN AM's side: what runs in the application's master container (``main.py``, skein's
master script), skein's application client as the AM's :class:`Containers` and what it weighs:
containers' ends, dropped executors, what the job holds, the RM delegation token."""
