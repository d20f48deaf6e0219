"""The crash harness in its short form: five SIGKILLs under a hard-durability load."""
import pytest

from crash import run

pytestmark = pytest.mark.single_server('SIGKILLs of one server under load (its own processes)')


def test_five_kills_lose_no_acknowledged_write():
    acked, _with_index, _seed = run(kills=5, verbose=False)
    assert acked > 50, "the load made too few writes to prove anything (%d)" % acked


def test_kills_during_resharding_lose_no_acknowledged_write():
    acked, with_index, _seed = run(kills=3, verbose=False, shards=3, reshard=True)
    assert with_index
    assert acked > 30, "the load made too few writes to prove anything (%d)" % acked
