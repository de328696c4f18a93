"""Declared tasks: task files (name, version, schemas, prompt, route, sampling, deadline, cache) and their post steps.

Loaded by the reasoning service, which runs them (``RunTask``), and by the gateway, which lists them,
checks input before a call and keeps the response cache.
"""
