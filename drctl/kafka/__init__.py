"""Kafka access: client factory with one retry policy, Connect REST, group and record reads."""
