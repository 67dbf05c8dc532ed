"""A small training package: data loading, the model, snapshots and the training loop."""
