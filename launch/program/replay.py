"""The replay node and its checkpoints: Reverb's tables survive a --resume and a restart.

RUN_DIR/checkpoints/replay/ holds Reverb checkpoints (its TFRecord checkpointer: one directory
per checkpoint, complete once it holds a DONE file). The node restores the newest complete one
whenever it starts: on --resume, and when its supervisor restarts it after a crash. Reverb's
checkpointer deletes every other entry of that directory after each save, so it holds one
checkpoint (two while a save is under way) and nothing else may be put there.

Only the coordinator writes checkpoints (`Checkpoints`: every `period_s`, and once at a graceful
stop after the learners have finished): each save deletes whatever else the directory holds, so
two saves at once could delete each other's directory mid-write.

Tables in DROPPED_ON_RESTORE come back empty: the IMPALA queue/replay holds sequences of
policies older than the restored learner's (BUILD_NOTES.md, "Replay checkpoints", says why
they are not worth keeping). Every start and every checkpoint is a line of RUN_DIR/replay.jsonl.
"""
import os
import threading
import time
from typing import Callable, Dict, Iterable, Optional, Sequence

import launchpad as lp
import reverb
from absl import logging
from launchpad import address as lp_address

from agents import adders
from launch.runtime import launchpad_internals, run_state

RECORDS = run_state.REPLAY_LOG
DROPPED_ON_RESTORE = (adders.IMPALA_TABLE,)


def checkpoint_dir(run_dir: str) -> str:
  return os.path.join(run_dir, run_state.REPLAY_CHECKPOINTS)


def append_record(records: run_state.RunRecords, record: dict) -> None:
  records.append_record(RECORDS, record)


def read_records(records: run_state.RunRecords):
  return records.read_records(RECORDS)


def latest_checkpoint(run_dir: str) -> Optional[str]:
  """The newest complete checkpoint (the one a starting node restores), or None."""
  root = checkpoint_dir(run_dir)
  try:
    names = sorted(os.listdir(root), reverse=True)
  except FileNotFoundError:
    return None
  for name in names:
    if os.path.exists(os.path.join(root, name, 'DONE')):
      return os.path.join(root, name)
  return None


def _bytes(path: str) -> int:
  total = 0
  for dirpath, _, filenames in os.walk(path):
    for name in filenames:
      try:
        total += os.path.getsize(os.path.join(dirpath, name))
      except OSError:
        pass
  return total


# Per earlier items' layout (agents.adders.LAYOUT_VERSION), the last commit that reads it.
EARLIER_LAYOUT_READERS = {1: '193c0aef41', 2: 'dc6915f6d9'}


def check_layout(records: run_state.RunRecords) -> None:
  """A resume whose replay checkpoint holds items (of a table it restores) in another layout is
  refused (one line)."""
  saved = [r for r in read_records(records) if r.get('event') == 'checkpoint'][-1:]
  layout = saved[0].get('layout', 1) if saved else adders.LAYOUT_VERSION
  kept = saved and any(n for table, n in saved[0].get('sizes', {}).items()
                       if table not in DROPPED_ON_RESTORE)
  if latest_checkpoint(records.run_dir) and kept and layout != adders.LAYOUT_VERSION:
    raise ValueError(f'cannot resume {records.run_dir}: its replay checkpoint holds items of '
                     f'layout {layout}, this version reads layout {adders.LAYOUT_VERSION}; commit '
                     f'{EARLIER_LAYOUT_READERS[layout]} is the last that reads it')


def table_sizes(client: reverb.Client) -> Dict[str, int]:
  return {name: int(info.current_size) for name, info in client.server_info().items()}


def serve(tables: Sequence[reverb.Table], port: Optional[int], records: run_state.RunRecords,
          dropped_on_restore: Iterable[str] = DROPPED_ON_RESTORE) -> reverb.Server:
  """A Reverb server of `tables` on `port` (None: a free one), restored from RUN_DIR's newest
  checkpoint if there is one, with the `dropped_on_restore` tables emptied; records the start."""
  start = time.time()
  found = latest_checkpoint(records.run_dir)
  checkpointer = reverb.checkpointers.DefaultCheckpointer(checkpoint_dir(records.run_dir))
  server = reverb.Server(tables=tables, port=port, checkpointer=checkpointer)
  client = server.localhost_client()
  restored = table_sizes(client) if found else {}
  dropped = {}
  for name in dropped_on_restore:
    if restored.get(name):
      client.reset(name)   # also resets its rate limiter (a replay's sample/insert ratio)
      dropped[name] = restored[name]
  append_record(records, {
      'event': 'start', 'pid': os.getpid(), 'checkpoint': found and os.path.basename(found),
      'restored': restored, 'dropped': dropped, 'seconds': round(time.time() - start, 3)})
  if found:
    logging.info('restored replay checkpoint %s: %s (emptied: %s)', found, restored, dropped)
  return server


class ReplayNode(lp.ReverbNode):
  """Launchpad's Reverb node, restoring RUN_DIR's last checkpoint when it starts (`serve`).

  Launchpad's own node can write checkpoints on a timer of whole minutes; ours leaves writing
  them to the coordinator (one writer, see the module docstring)."""

  def __init__(self, make_tables: Callable[[], Sequence[reverb.Table]], run_dir: str,
               dropped_on_restore: Iterable[str] = DROPPED_ON_RESTORE):
    super().__init__(make_tables, checkpoint_ctor=None)
    self._run_dir = run_dir
    self._dropped = tuple(dropped_on_restore)

  def run(self):   # the node's process starts here: the run's records are built from the path
    self._server = serve(launchpad_internals.reverb_node_tables(self),
                         lp_address.get_port_from_address(self.reverb_address.resolve()),
                         run_state.RunRecords(self._run_dir), self._dropped)
    launchpad_internals.wait_for_stop()


class Checkpoints:
  """The coordinator's side: a checkpoint every `period_s` (in a thread, so a long save does not
  delay the coordinator's polling), and `final()` at a graceful stop. Failures (the replay node
  down while it restarts) are recorded and the next period tries again."""

  def __init__(self, client: reverb.Client, records: run_state.RunRecords, period_s: float):
    self._client, self._records, self._period_s = client, records, period_s
    self._lock = threading.Lock()
    self._stop = threading.Event()
    self._thread = threading.Thread(target=self._periodic, daemon=True)

  def start(self) -> 'Checkpoints':
    self._thread.start()
    return self

  def _periodic(self):
    while not self._stop.wait(self._period_s):
      self.save('periodic')

  def save(self, reason: str) -> dict:
    """Writes a checkpoint; returns (and records) its path, seconds, MB and the table sizes just
    before and after it (actors go on inserting: what it holds lies between the two)."""
    with self._lock:
      try:
        before = table_sizes(self._client)
        start = time.time()
        path = self._client.checkpoint()
        seconds = time.time() - start
        record = {'event': 'checkpoint', 'time': time.time(), 'reason': reason,
                  'layout': adders.LAYOUT_VERSION,
                  'path': os.path.basename(path),
                  'seconds': round(seconds, 3), 'mb': round(_bytes(path) / 2**20, 3),
                  'sizes_before': before, 'sizes': table_sizes(self._client)}
      except Exception as e:  # pylint: disable=broad-except
        record = {'event': 'checkpoint_failed', 'time': time.time(), 'reason': reason,
                  'error': f'{type(e).__name__}: {e}'[:300]}
      append_record(self._records, record)
      return record

  def final(self) -> dict:
    """Stops the periodic saves (waiting for one in progress) and writes the last checkpoint."""
    self._stop.set()
    return self.save('final')
