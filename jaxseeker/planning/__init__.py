"""The planner: per-device memory, FLOPs and fit of a recipe's training stages on a mesh, from shapes alone."""
