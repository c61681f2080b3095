"""The run's life: its directory and state (config.json, counts, segments, stop requests), the
local launcher and the node supervisor, process helpers, loopback binding and the run's summary;
a run sized to its host (host_preset); the runs of the commands that are no Launchpad training
program: the offline collection (collection)."""
