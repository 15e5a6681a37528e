"""scalebench results analysis."""
