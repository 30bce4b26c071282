#!/usr/bin/env python3
"""The Kubernetes Python client, unmodified, on the ConfigMaps of a namespace.

Point its kubeconfig at informerd's Kubernetes API (--kube-api-address) and
the list and the watch are served from informerd's cache; point it at the API
server and nothing changes in the code.

    python3 watch.py KUBECONFIG NAMESPACE EVENTS

It lists the ConfigMaps, then watches from the list's resourceVersion until
EVENTS changes have come. With RESUME_AFTER=n in its environment it ends its
watch after n changes and starts a new one from the last resourceVersion it
saw, as a program that restarts would. Prints one JSON object per line.
"""
import json
import os
import sys

from kubernetes import client, config, watch


def main():
    kubeconfig, namespace, events = sys.argv[1], sys.argv[2], int(sys.argv[3])
    resume_after = int(os.environ.get("RESUME_AFTER", "0"))
    config.load_kube_config(config_file=kubeconfig)
    core = client.CoreV1Api()

    cms = core.list_namespaced_config_map(namespace)
    rv = cms.metadata.resource_version
    emit(step="list", items=[[cm.metadata.name, cm.metadata.resource_version] for cm in cms.items])

    seen = 0
    while seen < events:
        w = watch.Watch()
        for event in w.stream(core.list_namespaced_config_map, namespace, resource_version=rv):
            meta = event["raw_object"]["metadata"]
            rv = meta["resourceVersion"]
            seen += 1
            emit(step="event", type=event["type"], name=meta["name"], resourceVersion=rv)
            if seen == events or seen == resume_after:
                w.stop()
        if seen < events:
            emit(step="resume", resourceVersion=rv)


def emit(**line):
    print(json.dumps(line), flush=True)


if __name__ == "__main__":
    main()
