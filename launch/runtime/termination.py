"""SIGTERM / SIGHUP end a CLI's run like Ctrl-C (final checkpoints and summaries, no orphans):
shared by `launch.train` and `launch.train_dqn`, which cannot import each other (their absl flags
would clash)."""
import signal


def _raise_keyboard_interrupt(signum, frame):
  raise KeyboardInterrupt


def stop_like_ctrl_c_on_termination() -> None:
  signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
  signal.signal(signal.SIGHUP, _raise_keyboard_interrupt)
