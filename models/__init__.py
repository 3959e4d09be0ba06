"""The model side of socialrl (docs/architecture.md). Importing it switches the Hugging Face libraries of the
process offline, unless SOCIALRL_ALLOW_HUB=1: nothing is fetched from or sent to a model hub at run time
(models/hub.py)."""

from models.hub import keep_offline

keep_offline()
