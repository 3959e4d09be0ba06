"""Agent runtime: code agents, LLM agents, the human agent, and the tournament."""
