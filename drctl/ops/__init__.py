"""Failover and failback procedures; replication control."""
