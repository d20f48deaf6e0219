"""The harness's fixtures for its own tests (see faults/fixtures.py)."""
from faults.fixtures import make_net, make_proxy  # noqa: F401
