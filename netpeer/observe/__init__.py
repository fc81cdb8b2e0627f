"""What netpeerd tells operators: Prometheus metrics (``metrics``, the only
user of prometheus_client) and structured logs with request ids (``logs``)."""
