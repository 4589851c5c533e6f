"""The steps both topologies share."""
