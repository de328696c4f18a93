"""HTTP plumbing of the gateway: errors, deadlines, body limits, API keys, telemetry, docs."""
