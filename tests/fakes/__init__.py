"""Fakes of the services helpbot talks to: they answer with the real response shapes, errors and rate limits."""
