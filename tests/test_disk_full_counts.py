"""A full disk and the counts: the counter node counts only what it saved (counts.json), so an
actor never logs an episode that a resumed run's counter lacks. On a full disk an actor's CSV row
still fits in its file's last page while counts.json, a new file renamed over the old, finds
none: a counter that kept such increments in memory lost them when the full disk stopped the run,
and the resumed run's counter stood below the logged episodes (the chaos soak's
counter_equals_logged_episodes, 1,498 env steps after one fill of a Cartpole run)."""
import errno
import json
import os

import pytest

from bench import soak
from launch.program import layout
from launch.runtime import run_state


def test_an_increment_the_counter_cannot_save_fails_and_is_not_counted(small_tmpfs):
  mount = small_tmpfs('1m')
  run_dir = str(mount / 'run')
  os.makedirs(run_dir)
  records = run_state.RunRecords(run_dir)
  counter = layout.Counter(run_dir)
  counter.increment(actor_episodes=1, actor_steps=20)
  soak.fill_disk(str(mount / 'filler'))
  with pytest.raises(OSError) as raised:
    counter.increment(actor_episodes=1, actor_steps=30)
  assert raised.value.errno == errno.ENOSPC
  saved = {'actor_episodes': 1, 'actor_steps': 20}
  assert counter.get_counts() == saved and records.load_counts() == saved
  os.remove(mount / 'filler')
  assert counter.increment(actor_episodes=1, actor_steps=40) == {'actor_episodes': 2,
                                                                'actor_steps': 60}
  with open(os.path.join(run_dir, run_state.COUNTS)) as f:
    assert json.load(f) == {'actor_episodes': 2, 'actor_steps': 60}
