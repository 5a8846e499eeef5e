"""Campaigns: a config becomes a job, runs on an engine per seed, logs to MLflow; reproduce, resume, plan."""
