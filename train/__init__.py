"""Training routing controllers: cost-aware oracle labels, imitation (MLP), MaskablePPO, leave-one-dataset-out."""
