"""The one-way topology: one flow, the target standing by."""
