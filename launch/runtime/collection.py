"""Offline collection, as `launch.collect`'s docstring describes it: in this process
(collect_in_process) or by a Launchpad program (build_program), and the run around it: its plan,
validated before any work (make_plan), the program run in a child in its own session and watched
like a training run, and what an interrupted run left at --out. Over 300 lines: the nodes and the
run that supervises them are one job."""
import dataclasses
import json
import os
import pickle
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from typing import Any, Dict, Iterator, List, Optional

import numpy as np

from envs import presets
from launch.runtime import processes

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


def parse_env_options(pairs) -> dict:
  import envs
  try:
    return envs.parse_options(pairs)
  except envs.EnvError as e:
    raise CollectError(str(e)) from e


def make_plan(env_name: str, env_options: dict, episodes: int, out: str, seed: int,
              num_actors: int, overwrite: bool, resume: bool,
              store_states: Optional[bool]) -> CollectPlan:
  """Validates everything before any work starts; raises CollectError (one line)."""
  import envs
  from estimators import dataset
  if not env_name:
    raise CollectError('--env is required')
  if not out:
    raise CollectError('--out is required')
  if episodes is None or episodes < 1:
    raise CollectError('--episodes must be a positive integer')
  if num_actors < 1:
    raise CollectError('--num_actors must be >= 1')
  if seed < 0:
    raise CollectError(f'--seed must be >= 0, got {seed}')
  if overwrite and resume:
    raise CollectError('--overwrite and --resume exclude each other')
  problem = dataset.unwritable_reason(out)
  if problem:
    raise CollectError(f'cannot write --out {os.path.abspath(out)}: {problem}')
  try:
    env = envs.make(env_name, seed=0, **env_options)
    oracle_states = presets.get(env_name).oracle_states
  except envs.EnvError as e:
    raise CollectError(str(e)) from e
  spec = env.observation_spec()
  if store_states is None:
    store_states = oracle_states
  if store_states and not hasattr(env, 'get_state'):
    raise CollectError(f'environment {env_name!r} has no get_state(); use --nostore_states')
  out = os.path.abspath(out)
  have, have_transitions = 0, 0
  occupied = os.path.exists(out) and (not os.path.isdir(out) or bool(os.listdir(out)))
  if occupied and not (overwrite or resume):
    raise CollectError(f'{out} already exists; pass --overwrite to replace it or --resume '
                       f'to add episodes to it')
  if occupied and overwrite and not dataset.dataset_exists(out):
    raise CollectError(f'{out} is not an episode dataset; refusing to overwrite it')
  if occupied and resume:
    meta = _resumable_metadata(out, env_name, env_options)
    store_states = bool(meta.get('has_states'))
    have = int(meta['num_episodes'])
    have_transitions = int(meta.get('num_transitions', 0))
  return CollectPlan(env=env_name, env_options=dict(env_options), out=out, target=episodes, have=have,
              have_transitions=have_transitions,
              need=max(episodes - have, 0), seed=seed, num_actors=num_actors,
              overwrite=overwrite and occupied, append=resume and occupied,
              store_states=store_states, num_actions=int(env.action_spec().num_values),
              obs_spec={'shape': list(spec.shape), 'dtype': np.dtype(spec.dtype).name},
              run_id=uuid.uuid4().hex)


def _resumable_metadata(out: str, env_name: str, env_options: dict) -> dict:
  """The metadata of the dataset at `out` once it is known to be whole and of the same env:
  appending to a damaged dataset would bury the damage under new shards, or replace the
  episodes a damaged dataset_info.json no longer lists. The cheap env check runs before the
  full read of every shard."""
  from estimators import dataset
  try:
    meta = dataset.read_metadata(out)
    if meta.get('env') != env_name or meta.get('env_options') != env_options:
      raise CollectError(f'cannot resume {out}: it holds {meta.get("env")!r} episodes with '
                         f'options {meta.get("env_options")}, not {env_name!r} with {env_options}')
    return dataset.verify_dataset(out)
  except dataset.DamagedDatasetError as e:
    raise CollectError(f'cannot resume: {os.path.basename(e.file)} {e.problem}; restore '
                       f'{e.file} or pass --overwrite to start over') from e
  except dataset.DatasetError as e:
    raise CollectError(f'cannot resume: {e}') from e


def _child_main(plan_path: str):
  """Runs in the supervised child (its own session): launches the program and waits."""
  import launchpad as lp
  with open(plan_path, 'rb') as f:
    plan, log_dir = pickle.load(f)
  manager = lp.launch(build_program(plan, log_dir), launch_type='local_mp',
                      terminal='current_terminal')
  manager.wait()


def collect_distributed(plan: CollectPlan, progress: bool = True) -> dict:
  """Launches the program in a child launcher process and supervises it like launch.runtime.launcher
  does (the child runs in its own session, killed as a whole at the end with launcher's
  helpers, so no node outlives the run); returns the metadata once the dataset is written."""
  from estimators import dataset
  from launch.runtime import launcher, run_state
  log_dir = tempfile.mkdtemp(prefix='collect-')
  # launcher.watch looks for a recorded node failure in the records it is given: the collection's
  # live in its log directory (its nodes record none, so the watch alone judges a node's death).
  records = run_state.RunRecords(log_dir)
  plan_path = os.path.join(log_dir, 'plan.pkl')
  with open(plan_path, 'wb') as f:
    pickle.dump((plan, log_dir), f)
  log_path = os.path.join(log_dir, 'launchpad.log')
  start = time.time()

  def report():
    try:
      with open(os.path.join(log_dir, 'progress.txt')) as f:
        done = int(f.read() or 0)
    except (OSError, ValueError):
      done = 0
    print(f'[{time.time() - start:6.0f}s] episodes {done:>9,}/{plan.need:,}', file=sys.stderr,
          flush=True)

  failure = None
  started = time.time()
  with open(log_path, 'ab') as log:
    # Imported as a module (not run as __main__), so nodes are pickled by reference.
    child = subprocess.Popen([sys.executable, '-c', 'import sys; from launch.runtime import collection; '
                              'collection._child_main(sys.argv[1])', plan_path],
                             stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                             start_new_session=True, cwd=os.getcwd(),
                             env=dict(os.environ, PYTHONUNBUFFERED='1'))
    try:
      failure = launcher.watch(child, records, report if progress else None,
                               progress_every_s=PROGRESS_EVERY_S)
    finally:   # on SIGINT/SIGTERM too (a KeyboardInterrupt): no node outlives the run
      processes.kill_session(child)
      if not _written_by(plan):
        _remove_partial_writes(plan.out, started)
  done_path = os.path.join(log_dir, 'progress.txt.done')
  done = {}
  if os.path.exists(done_path):
    with open(done_path) as f:
      done = json.load(f)
  if done.get('run_id') != plan.run_id:
    raise RuntimeError(f'{failure or "the program ended before writing the dataset"}; '
                       f'node output: {log_path}')
  meta = dataset.read_metadata(plan.out)
  shutil.rmtree(log_dir, ignore_errors=True)
  # From the first Reverb item to the dataset written: collection without program start-up.
  return dict(meta, steady_s=done['written_at'] - done['first_item_at'],
              launcher_session=child.pid)


def _remove_partial_writes(out: str, since: float):
  """Removes the temporary directories a killed writer node left beside --out (a node killed
  with its session has no chance to clean up after itself, as write_episodes does in-process).
  Only those created since this run started: concurrent runs on one --out are unsupported."""
  parent = os.path.dirname(out)
  prefix = f'.{os.path.basename(out)}.writing-'
  for name in os.listdir(parent) if os.path.isdir(parent) else ():
    path = os.path.join(parent, name)
    try:
      fresh = name.startswith(prefix) and os.stat(path).st_ctime >= since - 1
    except OSError:
      continue
    if fresh and os.path.isdir(path):
      shutil.rmtree(path, ignore_errors=True)


def _written_by(plan: CollectPlan) -> bool:
  """Whether --out now holds the dataset this run wrote (its metadata names the run)."""
  from estimators import dataset
  try:
    return dataset.read_metadata(plan.out).get('collect_run_id') == plan.run_id
  except dataset.DatasetError:
    return False


def _left_at_out(plan: CollectPlan) -> str:
  """What an interrupted run left at --out, read back rather than assumed: the new dataset may
  have been swapped into place just before the signal landed."""
  out = plan.out
  if _written_by(plan):
    return f'the dataset had already been written: {out} is complete'
  if plan.append:
    return f'{out} was left as it was ({plan.have} episodes)'
  if plan.overwrite:
    return f'{out} was left as it was'
  return f'nothing was written to {out}'


def run(env: str, episodes: int, out: str, env_options: Optional[dict] = None, seed: int = 0,
        num_actors: int = 1, overwrite: bool = False, resume: bool = False,
        store_states: Optional[bool] = None, progress: bool = True) -> dict:
  """Programmatic entry point; returns the dataset metadata. Raises CollectError."""
  plan = make_plan(env, env_options or {}, episodes, out, seed, num_actors, overwrite, resume,
                   store_states)
  if plan.need == 0:
    from estimators import dataset
    print(f'{plan.out} already holds {plan.have} episodes (>= {episodes}); nothing to do',
          file=sys.stderr)
    return dataset.read_metadata(plan.out)
  start = time.time()
  try:
    if num_actors == 1:
      meta = collect_in_process(plan, progress)
    else:
      meta = collect_distributed(plan, progress)
  except KeyboardInterrupt:
    raise CollectInterrupted(_left_at_out(plan)) from None
  wall = time.time() - start
  new_steps = meta['num_transitions'] - (plan.have_transitions if plan.append else 0)
  steady = meta.pop('steady_s')
  print(f'wrote {plan.need} episodes ({new_steps} steps) to {plan.out} in {wall:.1f}s; '
        f'{plan.need / steady:.0f} episodes/s, {new_steps / steady:.0f} steps/s after '
        f'start-up; the dataset holds {meta["num_episodes"]} episodes, '
        f'{meta["num_transitions"]} transitions', flush=True)
  return dict(meta, collect_wall_s=wall, collect_steady_s=steady, collected_episodes=plan.need,
              collected_transitions=new_steps)
