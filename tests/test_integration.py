"""Launches the real distributed program (local_mp: Reverb, counter, limiter, IMPALA learner,
precedence learner, 2 actors) for a few thousand steps and checks what flowed where."""
import csv
import json
import os
import subprocess
import sys
import time

import psutil
import pytest

from launch.program import checkpointing
from launch.runtime import processes, summary

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def _listening_addresses(session: int):
  """(node pid, address) of every TCP socket listening in the run's process session."""
  out = []
  for pid in processes.leftover_processes(session):
    try:
      for c in psutil.Process(pid).connections(kind='inet'):
        if c.status == psutil.CONN_LISTEN:
          out.append((pid, c.laddr.ip))
    except psutil.Error:
      pass
  return out


def test_rae_program_end_to_end(tmp_path):
  run_dir = tmp_path / 'run'
  cmd = [sys.executable, '-m', 'launch.train', '--env', 'cartpole', '--reward_free', '--mode', 'rae',
         '--num_actors', '2', '--envs_per_actor', '2', '--max_steps', '30000', '--run_dir', str(run_dir),
         '--precedence_env_steps_per_update', '10', '--launch_type', 'local_mp']
  proc = subprocess.Popen(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True)
  # While it runs: every node listens on loopback only.
  listening, deadline = [], time.time() + 300
  while proc.poll() is None and time.time() < deadline:
    counts = run_dir / 'counts.json'
    if counts.exists() and json.loads(counts.read_text()).get('actor_steps', 0) > 0:
      listening = _listening_addresses(int((run_dir / 'launcher_session.txt').read_text()))
      break
    time.sleep(1.0)
  stdout, stderr = proc.communicate(timeout=420)
  assert proc.returncode == 0, stdout[-3000:] + stderr[-3000:]
  assert 'run summary' in stdout
  assert len({pid for pid, _ in listening}) >= 5, listening  # replay, counter, coordinator, ...
  assert {ip for _, ip in listening} <= {'127.0.0.1', '::ffff:127.0.0.1'}, listening

  final = json.loads((run_dir / 'final_state.json').read_text())
  assert final['counts']['actor_steps'] >= 30000
  assert final['tables']['impala']['num_inserts'] > 0
  assert final['tables']['precedence']['num_inserts'] > 0

  s = json.loads((run_dir / 'summary.json').read_text())
  assert s['learner_steps'] > 0, s
  assert s['precedence_steps'] > 0, s
  assert s['status'] == 'completed', s

  # The final checkpoints hold each learner's last step (the coordinator asked them to save
  # after they stopped stepping), and the actors stopped within a few episodes of the budget.
  assert final['status'] == 'completed'
  for name, count in (('learner', 'learner_steps'), ('precedence_learner', 'precedence_steps')):
    header = checkpointing.read_header(str(run_dir / 'checkpoints' / name))
    assert header['steps'] == final['checkpoints'][name]['steps'] == final['counts'][count], (name, header, final)
  assert final['counts']['actor_steps'] < 30000 + 2000, final['counts']

  # Each actor received psi parameters that differ from the ones it started with.
  for actor in ('actor_0', 'actor_1'):
    rows = summary.read_log(str(run_dir), actor)
    assert rows, f'{actor} logged no episode'
    assert max(r.get('psi_change', 0.0) for r in rows) > 0.0, actor

  # The summary's speed per actor process is its share of the counter's env steps over the wall
  # time (not per room, half as much here); each actor process has at most its 2 rooms' episodes
  # (<= 200 steps) in flight beyond what it logged.
  steps = final['counts']['actor_steps']
  assert s['actor_processes'] == 2 and s['env_steps_per_second'] == pytest.approx(steps / s['wall_time_s'])
  # (speed x wall time is a float product: compared within its rounding)
  assert steps - 2 * 2 * 200 <= 2 * s['env_steps_per_second_per_actor'] * s['wall_time_s'] <= steps + 1e-6
  assert 'mean_penalised_steps_last' in s and 'mean_episode_length_last' in s
  # The progress figures reach TensorBoard against env steps, the last as the launch ended.
  scalars = _scalars(run_dir / 'logs' / 'progress')
  for tag in ('progress/env_steps_per_second', 'progress/mean_episode_length_last',
              'progress/mean_penalised_steps_last'):
    assert scalars.get(tag), sorted(scalars)
  assert scalars['progress/env_steps_per_second'][-1][0] == steps

  # No node process of this run is left.
  session = int((run_dir / 'launcher_session.txt').read_text())
  assert processes.leftover_processes(session) == []


def _scalars(event_dir):
  """{tag: [(step, value), ...]} of the TensorBoard event files in `event_dir`."""
  from tensorboard.backend.event_processing import event_accumulator
  from tensorflow import make_ndarray
  acc = event_accumulator.EventAccumulator(str(event_dir), size_guidance={'tensors': 0})
  acc.Reload()
  return {tag: [(e.step, float(make_ndarray(e.tensor_proto))) for e in acc.Tensors(tag)]
          for tag in acc.Tags()['tensors']}


def test_one_actor_run_ends_at_its_budget(tmp_path):
  """With one actor and no learner, the actor's last counts reach the counter node only through
  its idle loop once it stops at the budget: the run must end by itself (it once waited forever)."""
  run_dir = tmp_path / 'run'
  cmd = [sys.executable, '-m', 'launch.train', '--env', 'cliff', '--agent', 'random', '--mode',
         'none', '--num_actors', '1', '--max_steps', '3000', '--run_dir', str(run_dir)]
  proc = subprocess.run(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                        timeout=300)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  final = json.loads((run_dir / 'final_state.json').read_text())
  assert final['status'] == 'completed' and final['counts']['actor_steps'] >= 3000, final


@pytest.mark.slow
def test_the_learner_scores_the_steps_with_the_policy_that_acted(tmp_path):
  """With a learning rate of 1e-30 the learner's policy stays the actors' policy, so V-trace's
  ratios must be 1 however stale the actors' parameters: |log rho| ~ 0. Sokoban's network with
  Haiku's initialisation on unscaled bytes starts near-deterministic and different in every room
  (experiments.studies.first_policy), so an observation, action or behaviour-logits row out of line
  between the actors, Reverb and the learner would show as |log rho| of order 1."""
  run_dir = tmp_path / 'run'
  cmd = [sys.executable, '-m', 'launch.train', '--env', 'sokoban', '--mode', 'none',
         '--num_actors', '1', '--envs_per_actor', '4', '--batch_size', '4',
         '--samples_per_insert', '0', '--self_imitation_updates', '0', '--learning_rate', '1e-30',
         '--nopolicy_centre_on_agent', '--policy_init', 'lecun', '--policy_pixel_scale', '1',
         '--max_steps', '6000', '--run_dir', str(run_dir)]
  proc = subprocess.run(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                        timeout=420)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  with open(run_dir / 'logs' / 'learner' / 'logs.csv') as f:
    rows = list(csv.DictReader(f))
  assert len(rows) >= 2, rows
  # The check has teeth: a policy far from uniform, acted on by parameters some updates old.
  assert max(float(r['policy_entropy']) for r in rows) < 1.0, rows
  assert max(float(r['policy_lag_mean']) for r in rows) >= 1, rows
  assert max(float(r['log_rho_abs_mean']) for r in rows) < 1e-4, rows
