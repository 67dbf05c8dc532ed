"""The job's runtime: the ApplicationMaster and the per-task executor."""
