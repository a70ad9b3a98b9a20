"""`make bench`: the ParallelJob operator against the built-in Job controller, on the
local cluster, with the scenarios and targets of issue 7. Run as ``python -m bench``."""
