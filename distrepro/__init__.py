"""distrepro harness: one engine, many methods, emulated heterogeneous hardware.

The harness owns data, models, loss, evaluation, budgets, the virtual clock and logging; a method
(``methods/<name>/``) owns only data allocation, local optimisation and communication through ``Comm``.
"""

__version__ = "0.1.0"
