"""`agentledger phase ...` (placeholder until the phase compiler lands)."""
