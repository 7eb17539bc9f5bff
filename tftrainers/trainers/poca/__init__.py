"""MA-POCA: ``POCATrainer`` (targets) and ``POCAOptimizer`` (losses, one compiled update)."""
