"""SIGTERM / SIGHUP end a CLI's run like Ctrl-C (final checkpoints and summaries, no orphans):
shared by `launch.train` and `launch.train_dqn`, which cannot import each other (their absl flags
would clash). Code that an exception raised at an arbitrary bytecode would leave broken runs
under `stop_signals_deferred`."""
import contextlib
import signal
import threading

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _raise_keyboard_interrupt(signum, frame):
  raise KeyboardInterrupt


def stop_like_ctrl_c_on_termination() -> None:
  signal.signal(signal.SIGTERM, _raise_keyboard_interrupt)
  signal.signal(signal.SIGHUP, _raise_keyboard_interrupt)


@contextlib.contextmanager
def stop_signals_deferred():
  """Runs the body whole and acts on a stop signal that came meanwhile at its end, with the
  handler that was in place. TensorFlow's eager calls are the reason: a KeyboardInterrupt raised
  inside one can leave its context half made, and every later op of the process then fails with a
  TypeError. Blocking the signal would not do: the kernel hands it to any thread of the process
  that does not block it, and Python runs the handler in the main thread at its next bytecode all
  the same. Signal handlers can only be set from the main thread; elsewhere this does nothing."""
  if threading.current_thread() is not threading.main_thread():
    yield
    return
  came = []
  previous = {s: signal.signal(s, lambda signum, frame: came.append(signum))
              for s in STOP_SIGNALS}
  try:
    yield
  finally:
    for signum, handler in previous.items():
      signal.signal(signum, handler)
    if came:
      handler = previous[came[0]]
      if callable(handler):
        handler(came[0], None)
      elif handler == signal.SIG_DFL:
        signal.raise_signal(came[0])
