"""The paper's experiments: typed steps (spec), one module per experiment (sokoban, cliff,
cartpole_plus, cartpole_reward_free, turf), their registry, the runner that runs them
resumably, and their pages."""
