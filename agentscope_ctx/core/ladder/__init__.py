"""The ladder's rungs without a model: the accountant, the cuts, their plan, the fit."""
