"""Training ingredients the harness owns: optimizers, learning-rate schedules, models."""
