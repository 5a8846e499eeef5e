"""Datasets as the harness sees them (:mod:`distrepro.data.loading`) and the torchvision shim."""
