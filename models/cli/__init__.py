"""The command lines that need no Dagster (`python -m models.cli.<name>`) and the leaderboard they and the
`endpoint_leaderboard` asset run.

- `run_tournament`: the code-agent tournament alone (seconds); `make run` materialises it as an asset.
- `evaluate_endpoint`: any OpenAI-compatible endpoint, or a model served by the project's engine, on the
  leaderboard.
- `play` (`make play`): a negotiation in the browser against a code agent or a registered model.
- leaderboard.py (not a command): an endpoint on every SocialRL domain and the Red-Black game, so it joins both
  papers; assets/leaderboard.py and `evaluate_endpoint` call it.

They sit at the models layer because they use only models/, agents/ and environments/ (tests/test_layers.py), on
its top floor (nothing else in models/ imports them); like pipelines/ they are edges: they read the environment
($SOCIALRL_DATA_DIR, $SOCIALRL_PROFILE), join both papers' parts and wire them to the shell, so the
paper-free-core rule of models/ does not apply to them. The command lines that launch the code location's jobs
are in pipelines/.
"""
