"""Search: REST models, serving logic and the route."""
