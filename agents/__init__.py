"""Agents: the IMPALA policy (Acme builder), the random policy, RAE rewards and the RAC shield."""
