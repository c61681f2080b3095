"""The 'precedence' table through a real Reverb server: windows written by the actor's writer (its
rooms stepped by the actor loop) and read back as the precedence learner reads them (`agents.adders.precedence_windows`) are one room's
2w consecutive rows each, of fixed shape, with the real observations (each episode's final one
included) and the episode starts that split a window into its episodes."""
import numpy as np
import reverb
from acme import specs, wrappers
from acme.utils import loggers
from row_recorder import RowRecorder

import envs
from agents import acting, adders
from agents import loop as loop_lib
from estimators import pairs

ROOMS = 2


def test_windows_are_one_rooms_consecutive_rows():
  rooms = [wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=k, reward_free=False))
           for k in range(ROOMS)]
  spec = specs.make_environment_spec(rooms[0])
  period = 4
  server = reverb.Server([reverb.Table(
      adders.PRECEDENCE_TABLE, reverb.selectors.Fifo(), reverb.selectors.Fifo(), 1000,
      reverb.rate_limiters.MinSize(1), max_times_sampled=1,
      signature=adders.precedence_signature(spec, period, ROOMS))])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    writer = RowRecorder(ROOMS, adders.ActorWriter(client, ROOMS, window=period))
    loop = loop_lib.BatchedEnvironmentLoop(
        rooms, acting.BatchedActor(2, acting.ReversibilityConfig(), range(ROOMS)), 'none', writer,
        logger=loggers.NoOpLogger())
    loop.run(num_steps=ROOMS * 120)
    loop.close()
    n_items = client.server_info()[adders.PRECEDENCE_TABLE].current_size
    assert n_items >= 120 // period - 2
    iterator = adders.precedence_windows(client, 3, ROOMS)   # 3 windows: 2 items of 2 rooms
    boundaries = 0
    for m in range(n_items // 2):
      data = next(iterator).data
      assert data.observation.shape == (4, 2 * period, 4)
      for b in range(4):
        k = b % ROOMS
        # Which window of room k this is: the stream's rows it equals (stream-aligned).
        stream = [(obs, steps) for obs, steps, _ in writer.room(k)]
        starts = [s for s in range(0, len(stream) - 2 * period + 1, period)
                  if all(np.array_equal(stream[s + t][0], data.observation[b, t])
                         for t in range(2 * period))]
        assert len(starts) == 1
        rows = stream[starts[0]:starts[0] + 2 * period]
        np.testing.assert_array_equal(data.extras['valid'][b], [r[4] for _, r in rows])
        np.testing.assert_array_equal(data.start_of_episode[b], [r[0] != 0 for _, r in rows])
        observed = np.asarray(pairs.observed_steps(data.extras['valid'][b]))
        # Every row holds an observation (a step's, or a final one on a filler row), except a
        # filler at row 0, whose step is in the window before.
        assert observed[1:].all() and observed[0] == (rows[0][1][4] != 0)
        boundaries += int(data.start_of_episode[b, 1:].any())
    assert boundaries > 0   # windows with an episode boundary inside were read
  finally:
    server.stop()
