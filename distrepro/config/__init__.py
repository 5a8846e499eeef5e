"""Run configuration: the YAML a user writes, validated into :class:`~distrepro.config.run_config.RunConfig`."""
