"""Plugin discovery: where plugins live (:mod:`~distrepro.plugins.roots`) and how they are loaded
(:mod:`~distrepro.plugins.registry`)."""
