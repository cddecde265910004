"""Search service: hybrid retrieval and cited answers."""
