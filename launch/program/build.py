"""The names under which programs built before the builder / layout split pickled their node
functions: a cluster package's RUN_DIR/cluster/program/<group>.pkl and every supervised node's
bytes refer to them by module path, so a replica or a restarted node of such a run looks them
up here. New code imports launch.program.layout (and launch.program.builder) instead."""
from launch.program.coordinator import Coordinator  # noqa: F401
from launch.program.layout import Counter  # noqa: F401
from launch.program.layout import actor_node as make_actor  # noqa: F401
from launch.program.layout import learner_node as make_learner  # noqa: F401
from launch.program.layout import (
    precedence_learner_node as make_precedence_learner,  # noqa: F401
)
from launch.program.layout import replay_tables as make_tables  # noqa: F401
