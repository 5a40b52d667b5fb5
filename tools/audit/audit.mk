# tools/audit/audit.mk - rules for this component (filled in by its owner)
