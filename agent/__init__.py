"""helpbot's agent: Claude (on Bedrock) investigates with mcp_lib's tools and answers with sources.

Modules: ``loop`` (the agent loop: start here), ``model`` (the model seam and SDK clients), ``prompt`` (system
prompt), ``history`` (the transcript), ``economy`` (token economy), ``degraded`` (no-model answers), ``tools``
(the tool seam), ``settings``, ``scripted`` (a scripted model for tests), ``answer``/``thread``/``slack_out``/
``slack_format`` (the Slack front), ``events``/``relay`` (triggers), ``tags``, ``evals``, ``feedback``,
``report``, ``transcript`` and ``cli`` (``helpbot``). Nothing heavy is imported here, so ``helpbot --help``
stays fast.
"""
