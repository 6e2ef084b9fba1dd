"""reconcile: the runtime every porchkit controller runs on.

To come: the `Cluster` interface with a real-API-server backend and an embedded in-process API
server, informers, a deduplicating rate-limited work queue, controllers, a manager with leader
election and health/metrics endpoints, and the hook clients (webhook, python, pipeline).
"""
