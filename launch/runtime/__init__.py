"""The run's life: its directory and state (config.json, counts, segments, stop requests), the
local launcher and the node supervisor, process helpers, loopback binding and the run's summary."""
