"""Launches the real distributed program (local_mp: Reverb, counter, limiter, IMPALA learner,
precedence learner, 2 actors) for a few thousand steps and checks what flowed where."""
import json
import os
import subprocess
import sys

import pytest

from launch import launcher, summary

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), '..'))


def test_rae_program_end_to_end(tmp_path):
  run_dir = tmp_path / 'run'
  cmd = [sys.executable, '-m', 'launch.train', '--env', 'cartpole', '--reward_free', '--mode', 'rae',
         '--num_actors', '2', '--max_steps', '30000', '--run_dir', str(run_dir),
         '--env_steps_per_psi_update', '10', '--launch_type', 'local_mp']
  proc = subprocess.run(cmd, cwd=ROOT, stdin=subprocess.DEVNULL, capture_output=True, text=True,
                        timeout=420)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  assert 'run summary' in proc.stdout

  final = json.loads((run_dir / 'final_state.json').read_text())
  assert final['counts']['actor_steps'] >= 30000
  assert final['tables']['impala']['num_inserts'] > 0
  assert final['tables']['precedence']['num_inserts'] > 0

  s = json.loads((run_dir / 'summary.json').read_text())
  assert s['learner_steps'] > 0, s
  assert s['precedence_steps'] > 0, s

  # Each actor received psi parameters that differ from the ones it started with.
  for actor in ('actor_0', 'actor_1'):
    rows = summary.read_log(str(run_dir), actor)
    assert rows, f'{actor} logged no episode'
    assert max(r.get('psi_change', 0.0) for r in rows) > 0.0, actor

  # No node process of this run is left.
  session = int((run_dir / 'launcher_session.txt').read_text())
  assert launcher.leftover_processes(session) == []
