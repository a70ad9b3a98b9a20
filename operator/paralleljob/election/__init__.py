"""Leader election: the Lease, the elector that holds it, the write fence it opens, and
the standby that waits for it."""
