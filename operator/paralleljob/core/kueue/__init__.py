"""A ParallelJob queued by Kueue as one Workload, pure: Kueue v0.17.0's Job integration
(``pkg/controller/jobs/job``, ``pkg/controller/jobframework``) ported to Python, one
concern per module (outside the core, imported through paralleljob.core)."""
