"""Analysis of finished runs: learning curves and statistics read back from run directories
(aggregate) and their plots (plot)."""
