"""The scale harness (issue 23): the real operator, as a subprocess, against a stub
Kubernetes API on 127.0.0.1 (tests/support/stub_api/) holding up to 10,000 running jobs
x 5 pods, without a cluster: startup CPU and wall time until every job is synced, memory
(and, under tracemalloc, bytes per object by structure), event-loop lag and the first pod
of new jobs. Run as ``python -m bench.scale``; see docs/benchmark.md."""
