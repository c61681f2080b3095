"""The private parts of Reverb this project uses, in one place, written against dm-reverb 0.7.3
(constraints.txt, requirements.lock). tests/test_private_apis.py checks that the installed
Reverb is that version and that each part below is still there as used; a Reverb upgrade starts
there.

  - `reverb.TrajectoryWriter._writer`: its C++ half, a `reverb.pybind.TrajectoryWriter`, to which
    agents.adders appends rows and creates items directly (`Append(row) -> cell references`,
    `CreateItem(table, priority, cells, squeeze)`), skipping the Python half's flattening
    (BUILD_NOTES.md, "Rows of three columns")."""
from reverb import pybind

REVERB_VERSION = '0.7.3'


def cc_writer(writer):
  """The C++ half of a `reverb.TrajectoryWriter` (`client.trajectory_writer(...)`); a
  RuntimeError naming this module when Reverb no longer keeps it where 0.7.3 does."""
  cc = getattr(writer, '_writer', None)
  if not isinstance(cc, pybind.TrajectoryWriter):
    raise RuntimeError(f'reverb.TrajectoryWriter no longer keeps its pybind.TrajectoryWriter as '
                       f'_writer (agents/reverb_internals.py was written against Reverb '
                       f'{REVERB_VERSION}): agents/adders.py appends through it')
  return cc
