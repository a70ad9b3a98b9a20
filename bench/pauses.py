"""The operator's pause histograms (operator/paralleljob/shell/metrics.py), by the names
both benchmarks scrape: scenario 8 (curve.py) and the scale harness (scale/run.py)."""

#: Every event-loop lag sample: how late a timer of the loop fired.
LOOP_LAG = "paralleljob_controller_event_loop_lag_seconds"
#: The part of each lag sample the operator's own work caused (the rest is its thread
#: waiting for a CPU).
LOOP_BLOCKED = "paralleljob_controller_event_loop_blocked_seconds"
#: Every full collection of the cyclic GC.
FULL_GC = "paralleljob_controller_gc_full_collection_seconds"
#: The part of each full collection the operator's own computing took.
FULL_GC_BLOCKED = "paralleljob_controller_gc_full_collection_blocked_seconds"
