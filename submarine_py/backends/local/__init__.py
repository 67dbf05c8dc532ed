"""The local backend: the AM and every task on this machine, as real processes
(or Docker containers when a role names an image)."""
from .backend import LocalBackend

__all__ = ["LocalBackend"]
