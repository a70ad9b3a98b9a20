"""The imperative shell: the API client, the per-job loops, one sync's API calls in
upstream's order, pod and status writes, claims, expectations, Events, metrics and
leader election. It asks the core (``paralleljob.core``) what to do and does it.
"""
