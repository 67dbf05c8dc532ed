"""Backends: where a planned job runs. A small interface and a registry.

``local`` runs the AM and every task on this machine; ``yarn`` submits a skein
application to the YARN cluster named by ``HADOOP_CONF_DIR``.
"""
from .base import Backend, backend_for_app, choose_backend, get_backend

__all__ = ["Backend", "backend_for_app", "choose_backend", "get_backend"]
