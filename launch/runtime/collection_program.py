"""The collection program: random-policy episodes written into an RLDS dataset, in this
process (collect_in_process) or by a Launchpad program (build_program: a Reverb queue, K actor
nodes inserting batches of whole episodes, one writer node draining the queue into the
dataset, which stops the program once it is written). What to collect is a CollectPlan; the
entry module is `launch.collect`, the run's life around a distributed collection
`launch.runtime.collection`."""
import dataclasses
import json
import os
import sys
import time
from typing import Any, Dict, Iterator, List

import numpy as np

EPISODE_TABLE = 'episodes'
_ACTOR_BATCH_STEPS = 2000                   # steps per Reverb item (several whole episodes)
_ACTOR_BATCH_EPISODES = 64
_QUEUE_ITEMS = 64
PROGRESS_EVERY_S = 10.0   # between the progress lines of a distributed collection


class CollectError(ValueError):
  """A one-line reason why collection cannot start (exit code 2)."""


class CollectInterrupted(KeyboardInterrupt):
  """Collection stopped by SIGINT/SIGTERM; `left` says what --out holds now (read back from
  disk). A KeyboardInterrupt, so programmatic callers see what they would without it."""

  def __init__(self, left: str):
    super().__init__(left)
    self.left = left


@dataclasses.dataclass(frozen=True)
class CollectPlan:
  """What one collection run does, validated before any work starts (make_plan)."""
  env: str
  env_options: Dict[str, Any]
  out: str                   # absolute
  target: int                # episodes the dataset holds at the end
  have: int                  # episodes already there (--resume)
  have_transitions: int
  need: int                  # episodes to collect now
  seed: int
  num_actors: int
  overwrite: bool            # replace the dataset at `out`
  append: bool               # add to it
  store_states: bool
  num_actions: int
  obs_spec: Dict[str, Any]   # {'shape': [...], 'dtype': name}
  run_id: str                # recorded in the metadata: which run wrote the dataset


def random_episode(env, rng: np.random.Generator, num_actions: int, store_states: bool):
  """One episode of the uniformly random policy, as an `estimators.dataset.Episode`."""
  from estimators.dataset import Episode
  ts = env.reset()
  observations = [np.asarray(ts.observation)]
  states = [env.get_state()] if store_states else None
  actions, rewards, discounts = [], [], []
  while True:
    action = int(rng.integers(num_actions))
    ts = env.step(action)
    observations.append(np.asarray(ts.observation))
    actions.append(action)
    rewards.append(0.0 if ts.reward is None else float(ts.reward))
    discounts.append(1.0 if ts.discount is None else float(ts.discount))
    if store_states:
      states.append(env.get_state())
    if ts.last():
      break
  return Episode(np.stack(observations), np.asarray(actions, np.int32),
                 np.asarray(rewards, np.float32), np.asarray(discounts, np.float32), states)


def episode_stream(env_name: str, env_options: dict, seed_words: List[int],
                   store_states: bool) -> Iterator:
  """An endless stream of random-policy episodes, determined by `seed_words`."""
  import envs
  seq = np.random.SeedSequence(seed_words)
  env_seed = int(seq.generate_state(1)[0] % (2**31 - 1))
  env = envs.make(env_name, seed=env_seed, **env_options)
  rng = np.random.default_rng(seq)
  num_actions = env.action_spec().num_values
  while True:
    yield random_episode(env, rng, num_actions, store_states)


def write(plan: CollectPlan, episodes) -> dict:
  from estimators import dataset
  return dataset.write_episodes(
      plan.out, episodes, plan.env, plan.env_options, plan.num_actions,
      plan.obs_spec, overwrite=plan.overwrite, append=plan.append,
      extra_metadata={'policy': 'random', 'collect_run_id': plan.run_id},
      verified=plan.append)   # make_plan has read the whole dataset already


def collect_in_process(plan: CollectPlan, progress: bool = True) -> dict:
  stream = episode_stream(plan.env, plan.env_options, [plan.seed, plan.have],
                          plan.store_states)

  t0 = []

  def limited():
    t0.append(time.time())
    bar = None
    if progress:
      from tqdm import tqdm
      bar = tqdm(total=plan.need, unit='ep', dynamic_ncols=True, file=sys.stderr)
    try:
      for _ in range(plan.need):
        ep = next(stream)
        if bar is not None:
          bar.update(1)
          bar.set_postfix(steps=len(ep.actions), refresh=False)
        yield ep
    finally:
      if bar is not None:
        bar.close()

  meta = write(plan, limited())
  return dict(meta, steady_s=time.time() - t0[0])


def _make_tables():
  import reverb
  return [reverb.Table.queue(EPISODE_TABLE, max_size=_QUEUE_ITEMS)]


def _pack(episodes) -> dict:
  """Several whole episodes as one Reverb item (flat arrays + per-episode lengths)."""
  item = {
      'observations': np.concatenate([ep.observations for ep in episodes]),
      'actions': np.concatenate([ep.actions for ep in episodes]).astype(np.int32),
      'rewards': np.concatenate([ep.rewards for ep in episodes]).astype(np.float32),
      'discounts': np.concatenate([ep.discounts for ep in episodes]).astype(np.float32),
      'lengths': np.asarray([len(ep.actions) for ep in episodes], np.int32),
  }
  if episodes[0].states is not None:
    from estimators.dataset import encode_state
    item['states'] = np.asarray(b'[' + b','.join(encode_state(ep.states) for ep in episodes)
                                + b']', dtype=object)
  return item


def _unpack(item: dict):
  from estimators.dataset import Episode, decode_state
  lengths = np.asarray(item['lengths'], np.int64)
  states = None
  if 'states' in item:
    raw = item['states']
    raw = raw.item() if isinstance(raw, np.ndarray) else raw
    states = decode_state(raw)
  a_off = np.concatenate([[0], np.cumsum(lengths)])
  o_off = np.concatenate([[0], np.cumsum(lengths + 1)])
  out = []
  for e, t in enumerate(lengths):
    out.append(Episode(np.asarray(item['observations'][o_off[e]:o_off[e + 1]]),
                       np.asarray(item['actions'][a_off[e]:a_off[e + 1]], np.int32),
                       np.asarray(item['rewards'][a_off[e]:a_off[e + 1]], np.float32),
                       np.asarray(item['discounts'][a_off[e]:a_off[e + 1]], np.float32),
                       None if states is None else list(states[e])))
  return out


class EpisodeActor:
  """Actor node: steps its own environment with the random policy and inserts batches of whole
  episodes into the Reverb queue (blocking while the queue is full) until the program stops."""

  def __init__(self, replay, plan: CollectPlan, actor_id: int):
    self._replay, self._plan, self._actor_id = replay, plan, actor_id

  def run(self):
    plan = self._plan
    stream = episode_stream(plan.env, plan.env_options,
                            [plan.seed, plan.have, 1 + self._actor_id], plan.store_states)
    writer = self._replay.writer(max_sequence_length=1)
    batch, steps = [], 0
    for ep in stream:
      batch.append(ep)
      steps += len(ep.actions) + 1
      if steps >= _ACTOR_BATCH_STEPS or len(batch) >= _ACTOR_BATCH_EPISODES:
        try:
          writer.append(_pack(batch))
          writer.create_item(EPISODE_TABLE, num_timesteps=1, priority=1.0)
        except RuntimeError as e:   # the Reverb server stopped: the program is ending
          print(f'actor {self._actor_id}: replay closed ({str(e).splitlines()[0][:80]}); '
                f'stopping', flush=True)
          # Exit at once: closing the Reverb writer after its server is gone aborts in gRPC.
          os._exit(0)  # pylint: disable=protected-access
        batch, steps = [], 0


class DatasetWriter:
  """Writer node: drains the queue into the dataset; stops the program when it is written."""

  def __init__(self, replay, plan: CollectPlan, progress_path: str):
    self._replay, self._plan, self._progress_path = replay, plan, progress_path
    self._first_at = None

  def _episodes(self):
    need, written, last_report = self._plan.need, 0, 0.0
    while written < need:
      for sample in self._replay.sample(EPISODE_TABLE, num_samples=1):
        if self._first_at is None:
          self._first_at = time.time()
        data = sample[0].data if isinstance(sample, list) else sample.data
        item = data if isinstance(data, dict) else dict(zip(
            sorted(['observations', 'actions', 'rewards', 'discounts', 'lengths'] +
                   (['states'] if self._plan.store_states else [])), data))
        for ep in _unpack(item):
          if written >= need:
            break
          written += 1
          yield ep
      if time.time() - last_report > 2.0 or written >= need:
        last_report = time.time()
        with open(self._progress_path, 'w') as f:
          f.write(str(written))

  def run(self):
    import launchpad as lp
    write(self._plan, self._episodes())
    with open(self._progress_path + '.done', 'w') as f:
      json.dump({'run_id': self._plan.run_id, 'first_item_at': self._first_at,
                 'written_at': time.time()}, f)
    lp.stop()


def build_program(plan: CollectPlan, log_dir: str):
  import launchpad as lp
  program = lp.Program(name='collect')
  with program.group('replay'):
    replay = program.add_node(lp.ReverbNode(_make_tables))
  with program.group('writer'):
    program.add_node(lp.CourierNode(DatasetWriter, replay, plan,
                                    os.path.join(log_dir, 'progress.txt')))
  with program.group('actor'):
    for actor_id in range(plan.num_actors):
      program.add_node(lp.CourierNode(EpisodeActor, replay, plan, actor_id))
  return program
