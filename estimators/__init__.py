"""Precedence (psi) and reversibility (phi) estimators: networks, losses, pairs, training, I/O."""
