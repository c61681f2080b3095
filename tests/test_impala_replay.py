"""The IMPALA table through a real Reverb server: a queue by default; with samples_per_insert > 0
a FIFO replay whose rate limiter holds the learner to that many samples per sequence written,
items of several rooms' sequences included."""
import dataclasses

import dm_env
import numpy as np
import pytest
import reverb
from acme import specs, wrappers

import envs
from agents import adders
from agents.acting import ReversibilityConfig
from envs import batch as batch_lib
from launch.program import builder
from launch.program.config import ImpalaConfig, RunConfig

SEQUENCE, ROOMS = 5, 2


def _env(seed=0):
  return wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=seed, reward_free=False))


def _fill(client, rows: int):
  """`rows` actor steps of ROOMS Cartpole rooms through one writer of one item per unroll."""
  writer = adders.ActorWriter(client, ROOMS, impala_sequence=SEQUENCE, max_in_flight_items=1)
  rooms = batch_lib.EnvironmentList([_env(k) for k in range(ROOMS)])
  obs, starts = rooms.reset(), np.ones(ROOMS, bool)
  for t in range(rows):
    actions = np.full(ROOMS, t % 2, np.int32)
    step = rooms.step(actions)
    filler = step.step_type == dm_env.StepType.FIRST
    writer.append(obs, adders.step_rows(starts, actions, step.reward, step.discount, filler, t),
                  np.zeros((ROOMS, 2), np.float32))
    obs, starts = step.observation, filler
  writer.close()


def _samples_before_blocking(client, limit: int) -> int:
  dataset = reverb.TrajectoryDataset.from_table_signature(
      server_address=client.server_address, table=adders.IMPALA_TABLE,
      max_in_flight_samples_per_worker=1, num_workers_per_iterator=1,
      rate_limiter_timeout_ms=3000)
  n = 0
  try:
    for _ in dataset.take(limit).as_numpy_iterator():
      n += 1
  except Exception:   # the rate limiter's timeout ends the stream
    pass
  return n


@pytest.mark.parametrize('samples_per_insert', [2.0, 4.0])
def test_replay_lets_the_learner_sample_each_sequence_about_spi_times(samples_per_insert):
  """Writing blocks when the learner falls behind and sampling when it runs ahead, so over 80
  sequences (40 items of 2 rooms) the learner draws spi per sequence written after the first
  min_size (Reverb's offset), plus the error buffer it may run ahead by once writing stops."""
  import threading
  spec = specs.make_environment_spec(_env())
  impala = ImpalaConfig(batch_size=4, sequence_length=SEQUENCE,
                        samples_per_insert=samples_per_insert, replay_size=128)
  table = builder.make_impala_table(impala, ROOMS, adders.impala_signature(spec, SEQUENCE, ROOMS))
  server = reverb.Server([table])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    writer = threading.Thread(target=_fill, args=(client, (SEQUENCE - 1) * 40 + 1))
    writer.start()
    drawn = ROOMS * _samples_before_blocking(client, limit=10_000)     # sequences
    writer.join(timeout=30)
    assert not writer.is_alive()
    inserted = ROOMS * client.server_info()[adders.IMPALA_TABLE].current_size
    assert inserted == ROOMS * 40
    min_size = 2 * impala.batch_size
    error_buffer = max(impala.batch_size, ROOMS * 2 * samples_per_insert)   # a whole item's
    # Once the writer is done, the learner may run ahead of the ratio by the error buffer.
    expected = samples_per_insert * (inserted - min_size) + error_buffer
    assert abs(drawn - expected) <= ROOMS * samples_per_insert, (drawn, expected)
  finally:
    server.stop()


def test_default_is_a_queue_and_bad_replay_settings_are_refused():
  spec = specs.make_environment_spec(_env())
  table = builder.make_impala_table(ImpalaConfig(), ROOMS,
                                    adders.impala_signature(spec, SEQUENCE, ROOMS))
  server = reverb.Server([table])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    _fill(client, rows=4 * 3 + 1)
    assert client.server_info()[adders.IMPALA_TABLE].current_size == 3   # items of 2 rooms
    assert _samples_before_blocking(client, limit=10) == 3
    assert client.server_info()[adders.IMPALA_TABLE].current_size == 0   # consumed
  finally:
    server.stop()
  with pytest.raises(ValueError, match='samples_per_insert must be >= 0'):
    ImpalaConfig(samples_per_insert=-1)
  with pytest.raises(ValueError, match='replay_size'):
    ImpalaConfig(batch_size=16, samples_per_insert=4, replay_size=20)
  with pytest.raises(ValueError, match='max_gradient_norm'):
    ImpalaConfig(max_gradient_norm=0)


def test_a_uniformly_sampled_replay_holds_one_rooms_sequence_per_item():
  """A queue's batch is its newest items, so blocks of the actor's rooms change nothing; a draw
  from the replay or from psi's windows is one item, which must stay one room's."""
  queue = RunConfig(env='sokoban', envs_per_actor=32, impala=ImpalaConfig(batch_size=256))
  replayed = RunConfig(env='sokoban', envs_per_actor=16,
                       impala=ImpalaConfig(batch_size=16, samples_per_insert=4))
  assert builder.rooms_per_item(queue) == 32
  assert builder.rooms_per_item(replayed) == 1
  # psi's windows are drawn uniformly too (and share the actor's items' rooms).
  online = dataclasses.replace(queue, reversibility=ReversibilityConfig(mode='rae'))
  assert online.online_estimators and builder.rooms_per_item(online) == 1
