"""The operator's runtime, every kind's engine: the API client and its protocols, the
informers and the caches they fill, the work queue, timers and retry, rate limits,
Events and metrics."""
