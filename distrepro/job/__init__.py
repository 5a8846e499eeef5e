"""The run specification, below the engines: what a run is (:class:`~distrepro.job.resolve.Job`), what an engine
is to its caller (:mod:`distrepro.job.engine`: the :class:`~distrepro.job.engine.Engine` call and the run it records
into), what it reports to while it trains (:mod:`distrepro.job.observer`) and what it returns
(:mod:`distrepro.job.results`)."""
