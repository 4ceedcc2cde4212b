"""helpbot's agent: Claude (on Bedrock) investigates with mcp_lib's tools and answers with sources.

Modules: ``loop`` (the agent loop), ``model`` (the model seam and SDK clients), ``prompt`` (system prompt),
``history`` (token economy), ``tools`` (the tool seam), ``settings``, ``scripted`` (a scripted model for tests)
and ``cli`` (``helpbot``). Nothing heavy is imported here, so ``helpbot --help`` stays fast.
"""
