"""drctl — an operator toolkit for Kafka disaster recovery."""

__version__ = "0.1.0"
