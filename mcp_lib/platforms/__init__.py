"""One module per platform: its metadata and its tool functions, nothing else."""
