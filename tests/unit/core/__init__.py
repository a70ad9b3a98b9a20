"""Unit tests of the pure core, one module per module of ``paralleljob.core``."""
