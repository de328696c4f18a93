"""Who may do what: API keys and their scopes, the owners of stateful resources, each route's decision."""
