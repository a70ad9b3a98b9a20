"""A job's sync, pure: upstream's pkg/controller/job, one concern per module (outside
the core, imported through paralleljob.core)."""
