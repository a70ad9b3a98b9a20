"""The pure decision core: upstream's ``pkg/controller/job`` ported to Python.

Given a job, its pods, the time and what the last API calls achieved, it says what to
do next. Nothing here does I/O: it imports only the package's leaves (``config``,
``constants``, ``json_types``, ``timeutil``) and itself (tests/unit/test_layers.py).
"""
