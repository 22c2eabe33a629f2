"""swift checks: written next."""
from machinery.differential.compare import Registry
registry = Registry()
