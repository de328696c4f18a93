"""The query-vector owner: cache, circuit breaker and the embedding client behind them."""
