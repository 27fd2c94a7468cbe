"""Core: canonical JSON, stage identity and manifests, config, errors, workspace, progress, checksums, the executor
seam."""
