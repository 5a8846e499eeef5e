"""The run specification, below the engines: what a run is (:class:`~distrepro.spec.job.Job`), what an engine
reports to while it trains (:mod:`distrepro.spec.observer`) and what it returns (:mod:`distrepro.spec.results`)."""
