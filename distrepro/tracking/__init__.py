"""MLflow: the client and campaign runs, buffered logging, provenance, and store checks that need no MLflow."""
