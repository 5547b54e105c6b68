"""The one version of gptlab: pyproject.toml reads this literal (setuptools, without importing),
and modules below the package's front door import it from here, not from `gptlab`, whose
type-checking imports reach the whole library."""

__version__ = "0.1.0"
