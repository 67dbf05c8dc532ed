"""submarine-py: distributed deep-learning jobs on Hadoop YARN, or on this machine."""
from .errors import SubmarineError, SpecError

__version__ = "0.1.0"
__all__ = ["SubmarineError", "SpecError", "__version__"]
