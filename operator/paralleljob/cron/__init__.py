"""The ParallelCronJob controller on the runtime: upstream's CronJob controller,
creating ParallelJobs."""
