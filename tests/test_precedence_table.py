"""The 'precedence' table through a real Reverb server: windows written by the actors' adder and
read back by the precedence learner's iterator never cross an episode boundary, are padded to a
fixed length, and mark real observations (including each episode's final one)."""
import numpy as np
import reverb
from acme import specs, wrappers

import envs
from agents import adders
from estimators import pairs
from launch.program.precedence_learner import make_window_iterator


def test_windows_stay_inside_episodes_and_pad_to_fixed_length():
  env = wrappers.SinglePrecisionWrapper(envs.make('cartpole', seed=0, reward_free=True))
  spec = specs.make_environment_spec(env)
  server = reverb.Server([reverb.Table(
      adders.PRECEDENCE_TABLE, reverb.selectors.Fifo(), reverb.selectors.Fifo(), 1000,
      reverb.rate_limiters.MinSize(1), signature=adders.precedence_signature(spec))])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    length, period = 8, 4
    adder = adders.TrajectoryAdder(client, window=period)
    episodes = []
    for ep in range(4):
      ts = env.reset()
      adder.add_first(ts)
      obs = [ts.observation]
      t = 0
      while not ts.last():
        ts = env.step(np.int32(1 if ep % 2 == 0 else t % 2))  # short and long episodes
        adder.add(np.int32(0), ts)
        obs.append(ts.observation)
        t += 1
      episodes.append(np.stack(obs))
    adder.close()
    n_items = client.server_info()[adders.PRECEDENCE_TABLE].current_size
    seen = 0
    iterator = make_window_iterator(client, 1, length)
    for _ in range(n_items):
      data = next(iterator).data
      valid = data.extras['valid'][0]
      mask = np.asarray(pairs.observed_steps(valid))
      n = int(mask.sum())
      assert mask[:n].all() and not mask[n:].any()            # valid prefix, then padding
      assert data.observation.shape == (1, length, 4)
      window = data.observation[0, :n]
      # The window is a contiguous piece of exactly one episode.
      hits = [e for e in episodes
              if any(np.array_equal(e[i:i + n], window) for i in range(len(e) - n + 1))]
      assert len(hits) == 1
      assert not data.start_of_episode[0, 1:n].any()
      seen += 1
    assert seen >= 4
  finally:
    server.stop()
