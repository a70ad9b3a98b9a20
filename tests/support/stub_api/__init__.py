"""A stub Kubernetes API server for running the real operator without a cluster: an
aiohttp server on 127.0.0.1 (apiserver.py) over an in-memory store with watches,
paging and resourceVersions (store.py), label selectors (labels.py), JSON merge and
strategic merge patches (patch.py), the resources it serves and their discovery
(resources.py), realistic seed objects (objects.py), a record of what it saw
(record.py), and another replica holding the leader election Lease (lease.py). The
scale harness (bench/scale/) runs the operator against it; the unit tests in
tests/unit/stub_api/ check it against what kube-apiserver does. The merge patch is also
the one the fuzz tests and the unit tests' FakeApi apply."""
