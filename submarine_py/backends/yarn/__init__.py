"""The YARN backend: the job as a skein application on a Hadoop YARN 3.1+ cluster."""
from .backend import YarnBackend

__all__ = ["YarnBackend"]
