"""The IMPALA table through a real Reverb server: a queue by default; with samples_per_insert > 0
a FIFO replay whose rate limiter holds the learner to that many samples per sequence written."""
import numpy as np
import pytest
import reverb
from acme import specs, wrappers

import envs
from agents import adders
from launch.program import builder
from launch.program.config import ImpalaConfig

SEQUENCE = 5


def _fill(client, spec_env, steps: int):
  adder = adders.TrajectoryAdder(client, impala_sequence=SEQUENCE, max_in_flight_items=1)
  ts = spec_env.reset()
  adder.add_first(ts)
  for t in range(steps):
    ts = spec_env.step(np.int32(t % 2))
    adder.add(np.int32(t % 2), ts, {'logits': np.zeros(2, np.float32),
                                    'core_state': np.float32(0.0),
                                    'policy_version': np.float32(t)})
    if ts.last():
      ts = spec_env.reset()
      adder.add_first(ts)
  adder.flush()


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
  """Writing blocks when the learner falls behind and sampling when it runs ahead, so over 40
  sequences the learner draws spi per sequence written after the first min_size (Reverb's
  offset), plus the error buffer it may run ahead by once writing stops."""
  import threading
  env = wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=0, reward_free=False))
  spec = specs.make_environment_spec(env)
  impala = ImpalaConfig(batch_size=2, sequence_length=SEQUENCE,
                        samples_per_insert=samples_per_insert, replay_size=64)
  table = builder.make_impala_table(impala, adders.impala_signature(spec, SEQUENCE))
  server = reverb.Server([table])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    writer = threading.Thread(target=_fill, args=(client, env, (SEQUENCE - 1) * 40 + 1))
    writer.start()
    drawn = _samples_before_blocking(client, limit=10_000)
    writer.join(timeout=30)
    assert not writer.is_alive()
    inserted = client.server_info()[adders.IMPALA_TABLE].current_size
    assert inserted >= 40   # episode ends add filler entries
    min_size = 2 * impala.batch_size
    error_buffer = max(impala.batch_size, 2 * samples_per_insert)
    # Once the writer is done, the learner may run ahead of the ratio by the error buffer.
    expected = samples_per_insert * (inserted - min_size) + error_buffer
    assert abs(drawn - expected) <= samples_per_insert, (drawn, expected)
  finally:
    server.stop()


def test_default_is_a_queue_and_bad_replay_settings_are_refused():
  env = wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=0, reward_free=False))
  spec = specs.make_environment_spec(env)
  table = builder.make_impala_table(ImpalaConfig(), adders.impala_signature(spec, SEQUENCE))
  server = reverb.Server([table])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    _fill(client, env, steps=4 * 3 + 1)
    assert client.server_info()[adders.IMPALA_TABLE].current_size == 3
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
