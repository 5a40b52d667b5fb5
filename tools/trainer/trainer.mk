# tools/trainer/trainer.mk - rules for this component (filled in by its owner)
