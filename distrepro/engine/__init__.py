"""Engines that run method plugins: in-process (K virtual workers, one process) and torch.distributed."""
