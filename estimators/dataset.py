"""Offline episode datasets in RLDS format (one TFDS dataset, split 'train', one example per
episode), written with `tfds.core.SequentialWriter` and read with `tfds.builder_from_directory`.

    write_episodes('data/cartpole', episodes, 'cartpole', {'max_steps': 50000},
                   num_actions=2, obs_spec=env.observation_spec())
    episodes, meta = load_episodes('data/cartpole')
    flat = flatten(episodes)                       # layout of estimators.pairs.episode_layout
    ds = as_tf_dataset('data/cartpole')            # tf.data of RLDS episodes {'steps': Dataset}

RLDS step convention: an episode of T transitions is stored as T+1 steps. Step t holds
observation x_t and the action a_t taken there, with the reward/discount that followed it;
the last step holds the final observation x_T with a dummy action 0, reward 0, discount 0,
is_last=True (is_terminal=True when the episode ended by termination, i.e. its last discount
was 0, rather than by a time limit). When true environment states are given, each step also
has a 'state' string: the JSON of `env.get_state()` (tuples restored on load), so evaluation
can label transitions with the exact oracle.

Beside the TFDS files the dataset directory holds `noturningback.json` (env name, options,
num_actions, observation spec, number of episodes and steps, creation time). Writes go to a
temporary directory next to the target, renamed into place at the end, so an interrupted write
never damages an existing dataset.

This module is the facade of the package estimators/rlds/ (schema, writer, reader, verify,
flat): the names the tools use, from the module that defines each.
"""
# pylint: disable=unused-import
from estimators.rlds.flat import (  # noqa: F401
                                    concat_flat,
                                    flat_states,
                                    flatten,
                                    load_flat,
)
from estimators.rlds.reader import (  # noqa: F401
                                    as_tf_dataset,
                                    iter_episodes,
                                    load_episodes,
                                    read_metadata,
)
from estimators.rlds.schema import (  # noqa: F401
                                    DATASET_NAME,
                                    METADATA_FILE,
                                    SPLIT,
                                    DamagedDatasetError,
                                    DatasetError,
                                    DatasetExistsError,
                                    Episode,
                                    FlatData,
                                    decode_state,
                                    encode_state,
)
from estimators.rlds.verify import verify_dataset  # noqa: F401
from estimators.rlds.writer import (  # noqa: F401
                                    dataset_exists,
                                    unwritable_reason,
                                    write_episodes,
)
