"""Hardware profiles (devices, nodes, links, with cited figures and plausible ranges) and the workload table."""
