"""The paper's experiments: typed steps (spec), one module per experiment (sokoban, cliff,
cartpole, turf), their registry, the runner that runs them resumably, and their pages."""
