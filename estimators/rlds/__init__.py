"""Offline episode datasets in RLDS format, one role per module: schema (files, errors, Episode,
features, states, episode <-> RLDS example), writer, reader, verify, flat (the fast loader for
training and the flat layout). `estimators.dataset` is the facade the tools import."""
