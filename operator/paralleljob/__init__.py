"""ParallelJob: the batch/v1 Job controller as a custom resource, driven by kopf."""
