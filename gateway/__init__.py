"""The gateway: the backend's fixed, versioned REST contract over the mesh's gRPC services."""
