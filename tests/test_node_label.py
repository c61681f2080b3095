"""A dead node is named in the run's stop message even when the process that died is the
wrapper Launchpad starts it under (its pid is in no pid file)."""
from launch.runtime import processes

WRAPPER = ('/bin/bash /work/.venv/lib/python3.10/site-packages/launchpad/launch/run_locally/'
           'decorate_output 36 replay/0 /work/.venv/bin/python /work/.venv/lib/python3.10/'
           'site-packages/launchpad/nodes/python/process_entry.py --data_file /tmp/t/job.pkl '
           '--lp_task_id 0 --pdb_post_mortem')


def test_label_of_a_wrapped_node():
  assert processes.node_label(WRAPPER) == 'replay/0'


def test_no_label_without_the_wrapper():
  assert processes.node_label('/work/.venv/bin/python process_entry.py --lp_task_id 0') is None
  assert processes.node_label('decorate_output 36') is None
