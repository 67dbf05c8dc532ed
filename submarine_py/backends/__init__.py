"""Backends: where a planned job runs. An interface (``base.py``) and one registry
(``registry.py``).

``local`` runs the AM and every task on this machine; ``yarn`` submits a skein
application to the YARN cluster named by ``HADOOP_CONF_DIR``. Each has its own
package. Importing this package imports only the registry: no backend, no plan.
"""
from .registry import BACKENDS, backend_for_app, choose_backend, get_backend

__all__ = ["BACKENDS", "backend_for_app", "choose_backend", "get_backend"]
