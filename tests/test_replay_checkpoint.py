"""Replay checkpoints on real Reverb servers (launch.program.replay): what a restarted or resumed
replay node gets back, what it drops, and that the checkpoint directory does not grow."""
import os
import time

import numpy as np
import pytest
import reverb

from agents import adders
from launch.program import replay
from launch.runtime import run_state


def _tables():
  return [reverb.Table.queue(adders.IMPALA_TABLE, max_size=100),
          reverb.Table(adders.PRECEDENCE_TABLE, sampler=reverb.selectors.Uniform(),
                       remover=reverb.selectors.Fifo(), max_size=50,
                       rate_limiter=reverb.rate_limiters.MinSize(5))]


def _fill(client, n_precedence, n_impala):
  for i in range(n_precedence):
    client.insert(np.full(3, i, np.float32), {adders.PRECEDENCE_TABLE: 1.0})
  for i in range(n_impala):
    client.insert(np.full(2, i, np.int32), {adders.IMPALA_TABLE: 1.0})


def test_a_restarted_server_gets_the_precedence_table_back_and_an_empty_impala_queue(tmp_path):
  records = run_state.RunRecords(str(tmp_path))
  server = replay.serve(_tables(), None, records)
  client = server.localhost_client()
  _fill(client, 30, 7)
  saves = [replay.Checkpoints(client, records, period_s=3600).save('test') for _ in range(3)]
  assert all(s['event'] == 'checkpoint' and s['mb'] > 0 for s in saves), saves
  assert saves[-1]['sizes'] == {adders.PRECEDENCE_TABLE: 30, adders.IMPALA_TABLE: 7}
  # Reverb keeps the newest checkpoint only.
  assert os.listdir(replay.checkpoint_dir(records.run_dir)) == [saves[-1]['path']]
  _fill(client, 5, 0)   # after the last checkpoint: lost with the server
  server.stop()

  server = replay.serve(_tables(), None, records)
  client = server.localhost_client()
  assert replay.table_sizes(client) == {adders.PRECEDENCE_TABLE: 30, adders.IMPALA_TABLE: 0}
  sample = next(iter(client.sample(adders.PRECEDENCE_TABLE, num_samples=1)))
  assert sample[0].data[0].shape == (3,)   # the restored items' data came back with them
  starts = [r for r in replay.read_records(records) if r['event'] == 'start']
  assert [s['checkpoint'] for s in starts] == [None, saves[-1]['path']]
  assert starts[-1]['restored'][adders.PRECEDENCE_TABLE] == 30
  assert starts[-1]['dropped'] == {adders.IMPALA_TABLE: 7}
  server.stop()


def test_an_unfinished_checkpoint_is_passed_over(tmp_path):
  records = run_state.RunRecords(str(tmp_path))
  server = replay.serve(_tables(), None, records)
  _fill(server.localhost_client(), 12, 0)
  done = replay.Checkpoints(server.localhost_client(), records, period_s=3600).save('test')
  server.stop()
  # A save cut by a kill: a newer directory without Reverb's DONE file.
  os.makedirs(os.path.join(replay.checkpoint_dir(records.run_dir), '9999-cut-by-a-kill'))
  assert replay.latest_checkpoint(records.run_dir).endswith(done['path'])
  server = replay.serve(_tables(), None, records)
  assert replay.table_sizes(server.localhost_client())[adders.PRECEDENCE_TABLE] == 12
  server.stop()


def test_periodic_checkpoints_then_a_final_one(tmp_path):
  records = run_state.RunRecords(str(tmp_path))
  server = replay.serve(_tables(), None, records)
  client = server.localhost_client()
  checkpoints = replay.Checkpoints(client, records, period_s=0.2).start()
  _fill(client, 10, 0)
  time.sleep(1.0)
  final = checkpoints.final()
  written = [r for r in replay.read_records(records) if r['event'] == 'checkpoint']
  assert len(written) >= 3 and [r['reason'] for r in written[:-1]] == ['periodic'] * (len(written) - 1)
  assert written[-1] == {**final, 'time': written[-1]['time']} and final['reason'] == 'final'
  time.sleep(0.5)   # no periodic save after the final one
  assert [r for r in replay.read_records(records) if r['event'] == 'checkpoint'][-1]['reason'] == 'final'
  server.stop()


def test_a_save_with_the_server_gone_is_recorded_not_raised(tmp_path):
  records = run_state.RunRecords(str(tmp_path))
  server = replay.serve(_tables(), None, records)
  client = reverb.Client(f'localhost:{server.port}')
  client.server_info()
  server.stop()
  record = replay.Checkpoints(client, records, period_s=3600).save('test')
  assert record['event'] == 'checkpoint_failed' and record['error'], record


def test_a_checkpoint_of_another_items_layout_is_refused_where_it_holds_items_kept(tmp_path):
  records = run_state.RunRecords(str(tmp_path))
  server = replay.serve(_tables(), None, records)
  client = server.localhost_client()
  _fill(client, 6, 3)
  saved = replay.Checkpoints(client, records, period_s=3600).save('test')
  server.stop()
  assert saved['layout'] == adders.LAYOUT_VERSION
  replay.check_layout(records)   # this version's own: resumed
  # The same checkpoint as an earlier version recorded it (no layout: one writer per room).
  earlier = {k: v for k, v in saved.items() if k != 'layout'}
  replay.append_record(records, earlier)
  with pytest.raises(ValueError,
                     match=f'holds items of layout 1.*{replay.EARLIER_LAYOUT_READERS[1]}'):
    replay.check_layout(records)
  replay.append_record(records, dict(saved, layout=2))   # blocks of rooms in the replay too
  with pytest.raises(ValueError,
                     match=f'holds items of layout 2.*{replay.EARLIER_LAYOUT_READERS[2]}'):
    replay.check_layout(records)
  # Only the IMPALA queue held items: it comes back empty anyway, so nothing old is read.
  replay.append_record(records, dict(earlier, sizes={adders.IMPALA_TABLE: 3,
                                                     adders.PRECEDENCE_TABLE: 0}))
  replay.check_layout(records)
