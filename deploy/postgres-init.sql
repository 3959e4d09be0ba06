-- One server, two databases: Dagster's instance and MLflow's backend store (tables are created on first use).
CREATE DATABASE dagster;
CREATE DATABASE mlflow;
