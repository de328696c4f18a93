"""The mesh's gRPC services, one package each, on a shared bootstrap."""
