"""A ParallelCronJob's sync, pure: upstream's pkg/controller/cronjob and robfig/cron
(outside the core, imported through paralleljob.core)."""
