"""Gap analysis (docs/design.md §5): planner and runner on the driver, the Spark job, pure
DataFrame diff functions, and Spark's Kafka connector."""
