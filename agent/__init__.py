"""helpbot's agent: Claude (on Bedrock) investigates with mcp_lib's tools and answers with sources.

``core`` is the agent (start at ``core/loop.py``), ``slack`` the Slack front (``helpbot answer``, the relay,
feedback), and the top level holds the commands. Nothing heavy is imported here, so ``helpbot --help`` stays fast.
"""
