"""Operations as code: Prometheus scrape config, alert rules, Alertmanager routing, Grafana dashboards."""
