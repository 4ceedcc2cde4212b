"""The agent: the loop, the model seam and the token economy. Imports neither the Slack front nor the CLI."""
