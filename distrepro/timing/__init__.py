"""Emulated time: compute and communication cost models and the flow network that shares links."""
