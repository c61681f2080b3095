"""What every episodic environment here shares: how a step ends an episode."""
import dm_env


def finish_step(env, reward, observation, terminated: bool) -> dm_env.TimeStep:
  """The TimeStep of a step that has already advanced `env._t`.

  Termination (falling, reaching the goal, solving) has discount 0; reaching `env._max_steps`
  truncates with discount 1, so bootstrapping learners can tell the two apart. Either one makes
  the next `step()` reset the environment (`env._needs_reset`).
  """
  if terminated:
    env._needs_reset = True  # pylint: disable=protected-access
    return dm_env.termination(reward, observation)
  if env._t >= env._max_steps:  # pylint: disable=protected-access
    env._needs_reset = True  # pylint: disable=protected-access
    return dm_env.truncation(reward, observation)
  return dm_env.transition(reward, observation)
