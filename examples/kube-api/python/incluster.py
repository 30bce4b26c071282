"""An unmodified Kubernetes Python client program that runs in a pod:
config.load_incluster_config(), a list and a write. Injected beside
informerd (docs/deploy.md), the pod's environment and service account
volume point it at informerd: the list is answered from informerd's cache
and the write is forwarded with the pod's token.

    python3 incluster.py NAME

Lists the ConfigMaps of its namespace, creates the ConfigMap NAME, and
prints one JSON object.
"""
import json
import sys

from kubernetes import client, config

config.load_incluster_config()
with open("/var/run/secrets/kubernetes.io/serviceaccount/namespace") as f:
    namespace = f.read().strip()
core = client.CoreV1Api()
listed = [cm.metadata.name for cm in core.list_namespaced_config_map(namespace).items]
core.create_namespaced_config_map(namespace, client.V1ConfigMap(metadata=client.V1ObjectMeta(name=sys.argv[1])))
print(json.dumps({"host": client.Configuration.get_default_copy().host, "listed": listed, "created": sys.argv[1]}))
