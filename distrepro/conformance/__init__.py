"""The tests every method plugin gets, shipped inside the package so a plugin outside any checkout runs them.

``distrepro test METHOD [--root DIR]`` (:mod:`distrepro.conformance.runner`) runs :mod:`.test_generated` under
pytest for one method: a tiny campaign that must learn and be logged (:func:`.checks.smoke_campaign`) and, for
a lockstep method, the checkpoint round trip (:func:`.checks.checkpoint_round_trip`), whose failure names the
parameters and the method attributes that differ and the tensor-holding attributes ``state_dict`` left out.
The repository's ``tests/plugins/test_plugins.py`` runs the same checks over every discovered method.
"""
