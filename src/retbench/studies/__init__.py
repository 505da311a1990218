"""Studies: configs that expand into (dataset x system) cells run by one cell runner."""
