"""The operator's version: the VERSION file at the repository's root, which the
package's metadata carries (pyproject.toml reads it when the package is built)."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as distribution_version

DISTRIBUTION = "paralleljob-operator"


def version() -> str:
    """This installation's version ("unknown" when the package's metadata is missing:
    run from a source tree that was never installed)."""
    try:
        return distribution_version(DISTRIBUTION)
    except PackageNotFoundError:
        return "unknown"
