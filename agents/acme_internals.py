"""The private parts of Acme this project uses, in one place, written against dm-acme 0.4.0
(setup.py; installed with --no-deps, BUILD_NOTES.md). tests/test_private_apis.py checks that the
installed Acme is that version and that each part below is still there as used; an Acme upgrade
starts there.

  - `counting.Counter._last_sync_time`: when the counter last passed its counts to its parent;
    it passes them on at the next read once `time_delta` has gone by since. The IMPALA learner
    (agents.learning) syncs at most every half second, and its last counts at a run's end must
    reach the counter node: `sync_on_next_read` makes the next read pass them on."""
ACME_VERSION = '0.4.0'
LAST_SYNC_TIME = '_last_sync_time'


def sync_on_next_read(counter) -> None:
  """Makes `counter`'s next `get_counts()` pass its counts to its parent whatever its time_delta
  (nothing for a counter that is no Acme Counter, or has no parent)."""
  if hasattr(counter, LAST_SYNC_TIME):   # Acme's Counter
    setattr(counter, LAST_SYNC_TIME, float('-inf'))
