"""`make bench`: the pipeline's speed and memory figures, each beside its budget."""
