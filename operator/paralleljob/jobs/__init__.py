"""The job controller on the runtime, one per kind of job (ParallelJob, batch/v1 Job):
upstream's syncJob and its collaborators."""
