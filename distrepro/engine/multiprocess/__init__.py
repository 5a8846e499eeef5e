"""The distributed engine: one OS process per worker over ``torch.distributed``, paced to the profile."""
