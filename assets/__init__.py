"""The Dagster assets and asset checks (thin: each calls one library function; pipelines/ assembles them)."""

import warnings

from dagster import PreviewWarning

# The domain-partitioned asset checks each printed Dagster's preview notice for partitioned checks on every load
# of the code location (five identical lines on `make ui`'s console); partitioned checks are what we mean to use.
warnings.filterwarnings("ignore", message="Specifying a partitions_def on an AssetCheckSpec", category=PreviewWarning)
