"""Files in, text out: ``/v1/files:read`` and ``/v1/collections/{name}/files``."""
