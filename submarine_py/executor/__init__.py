"""The executor: the program that runs in every task container, standard library only.

Everything in this folder is shipped into containers (on YARN as one file, ``bundle.py``;
locally as ``subm_<module>.py`` files) and runs with ``python3 -S`` in any image, so no module
here imports anything outside the standard library (``tests`` prove it). ``main.py`` is the
executor's life; the others are the modules it loads beside it.
"""
