"""The node's HTTP endpoint: /metrics, /healthz, /readyz and the dashboard.

Named `web`, not `http`, so that it is never taken for the standard
library's package. server.py owns the application and its listeners.
"""
