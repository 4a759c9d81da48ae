"""Live hang triangulation: what each rank of a stuck job is doing, from several sources."""
