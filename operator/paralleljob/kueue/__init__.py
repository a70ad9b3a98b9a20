"""A queued ParallelJob's Workload, kept as Kueue's Job integration keeps a Job's."""
