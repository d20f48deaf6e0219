"""The crash harness in its short form: five SIGKILLs under a hard-durability load."""
from crash import run


def test_five_kills_lose_no_acknowledged_write():
    acked, _with_index, _seed = run(kills=5, verbose=False)
    assert acked > 50, "the load made too few writes to prove anything (%d)" % acked
