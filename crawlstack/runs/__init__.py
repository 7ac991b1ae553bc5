"""Host runs: the frontier partitioned by host (issue 14); ``ports`` says how."""
