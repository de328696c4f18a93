"""Mock interview sessions on declared tasks."""
