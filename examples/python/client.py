#!/usr/bin/python3
"""A Python client of informerd: lists a resource, gets one object, and
watches from the list's resourceVersion, reconnecting from the last
resourceVersion it saw whenever the stream breaks -- the pattern every
client should follow.

It imports the modules protoc generates from api/proto/informerd/v1/cache.proto
(see README.md): put the folder they were generated into on PYTHONPATH.

Usage: client.py [--ca-file F] [--token-file F] [--fields PATHS] ADDRESS RESOURCE NAMESPACE EVENTS
  Prints one JSON line per step; stops after EVENTS watch events.
  --fields, comma-separated paths such as metadata.labels,status.podIP, is a
  field mask: list, get and watch return only those fields of each object
  (printed with each event), and the watch sends no change to other fields.
  With RESUME_AFTER=n in the environment it drops the stream after n events
  and resumes, to show (and test) that nothing is lost.
"""

import argparse
import json
import os
import re
import sys
import time

import grpc
from google.protobuf import field_mask_pb2

try:
    from informerd.v1 import cache_pb2 as pb
    from informerd.v1 import cache_pb2_grpc as pb_grpc
except ImportError as err:
    sys.exit(
        f"informerd client: cannot import the generated modules ({err}); generate them with\n"
        "  /usr/bin/protoc -I api/proto --python_out=gen --grpc_python_out=gen \\\n"
        "    --plugin=protoc-gen-grpc_python=/usr/bin/grpc_python_plugin informerd/v1/cache.proto\n"
        "and run with PYTHONPATH=gen (see examples/python/README.md)"
    )


def emit(**fields):
    print(json.dumps(fields), flush=True)


class TooOld(Exception):
    """The resourceVersion to resume from left informerd's history window."""


class Client:
    def __init__(self, address, ca_file=None, token_file=None, fields=None):
        if ca_file:
            with open(ca_file, "rb") as f:
                channel = grpc.secure_channel(address, grpc.ssl_channel_credentials(root_certificates=f.read()))
        else:
            channel = grpc.insecure_channel(address)
        self.channel = channel
        self.stub = pb_grpc.CacheServiceStub(channel)
        self.token_file = token_file
        # A google.protobuf.FieldMask for every call; None: whole objects.
        self.fields = field_mask_pb2.FieldMask(paths=fields) if fields else None

    def metadata(self):
        # Read the token on every call: the kubelet rotates projected
        # ServiceAccount tokens by replacing the file.
        if not self.token_file:
            return None
        with open(self.token_file) as f:
            return [("authorization", "Bearer " + f.read().strip())]

    def list(self, resource, namespace):
        """Every page of one snapshot: (objects, resourceVersion)."""
        objects, token = [], ""
        while True:
            resp = self.stub.List(
                pb.ListRequest(
                    resource=resource,
                    selector=pb.Selector(namespace=namespace),
                    continue_token=token,
                    fields=self.fields,
                ),
                metadata=self.metadata(),
            )
            objects.extend(resp.objects)
            token = resp.continue_token
            if not token:
                return objects, resp.resource_version

    def get(self, resource, namespace, name):
        req = pb.GetRequest(resource=resource, namespace=namespace, name=name, fields=self.fields)
        return self.stub.Get(req, metadata=self.metadata()).object

    def watch(self, resource, namespace, resource_version, want, resume_after=0):
        """Yields (event, resumed) for up to want events after resource_version,
        watching again from the last resourceVersion seen when the stream
        breaks (informerd restarted, shut down, or ended a slow stream)."""
        last_rv, seen, resumed = resource_version, 0, False
        while seen < want:
            call = self.stub.Watch(
                pb.WatchRequest(
                    resource=resource,
                    selector=pb.Selector(namespace=namespace),
                    resource_version=last_rv,
                    # With a mask, bookmarks also carry last_rv past the
                    # changes it hides: a resume after a long quiet spell
                    # starts from a recent resourceVersion, still inside
                    # informerd's history.
                    allow_bookmarks=True,
                    fields=self.fields,
                ),
                metadata=self.metadata(),
            )
            try:
                for ev in call:
                    last_rv = ev.resource_version
                    if ev.type == pb.EVENT_TYPE_BOOKMARK:
                        continue
                    seen += 1
                    yield ev
                    if seen >= want:
                        call.cancel()
                        break
                    if resume_after and seen == resume_after and not resumed:
                        resumed = True
                        emit(step="resume", **{"from": last_rv})
                        call.cancel()
                        break
            except grpc.RpcError as err:
                code = err.code()
                if code == grpc.StatusCode.CANCELLED:
                    continue
                if code == grpc.StatusCode.OUT_OF_RANGE:
                    # Too old to resume: a real client lists again here.
                    raise TooOld(f"resourceVersion {last_rv} is too old: list again ({err.details()})") from err
                if code in (grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.NOT_FOUND,
                            grpc.StatusCode.PERMISSION_DENIED, grpc.StatusCode.UNAUTHENTICATED):
                    raise
                # UNAVAILABLE (shutdown, restart, failover), RESOURCE_EXHAUSTED
                # (slow consumer, limits): back off, resume from last_rv.
                emit(step="reconnect", code=code.name, **{"from": last_rv})
                time.sleep(0.2)


def decode(obj):
    return json.loads(obj.json)


def split_fields(s):
    """The paths of --fields, split at the commas outside backquotes (a name
    in backquotes may hold dots: metadata.labels.`app.kubernetes.io/name`)."""
    return [p.strip() for p in re.findall(r"(?:`[^`]*`|[^,])+", s or "") if p.strip()]


def main():
    parser = argparse.ArgumentParser(description="List, Get and a resumable Watch against informerd")
    parser.add_argument("address", help="host:port or unix:///path")
    parser.add_argument("resource", help='e.g. "configmaps", "deployments.apps"')
    parser.add_argument("namespace", help="namespace; empty for all")
    parser.add_argument("events", type=int, help="stop after this many watch events")
    parser.add_argument("--ca-file", help="PEM CA bundle: use TLS and verify informerd with it")
    parser.add_argument("--token-file", help="bearer token file (--auth-mode=kubernetes), read on every call")
    parser.add_argument("--fields", help="only these fields of each object: comma-separated paths, e.g. metadata.labels,status.podIP")
    args = parser.parse_args()
    resume_after = int(os.environ.get("RESUME_AFTER", "0"))

    fields = split_fields(args.fields)
    client = Client(args.address, args.ca_file, args.token_file, fields)

    def shown(obj):
        # With a mask, each event line carries the object as the mask shows it.
        return {"object": decode(obj)} if fields else {}

    try:
        objects, rv = client.list(args.resource, args.namespace)
        emit(step="list", resourceVersion=rv, names=[o.name for o in objects])
        if objects:
            got = client.get(args.resource, objects[0].namespace, objects[0].name)
            emit(step="get", name=got.name, kind=decode(got)["kind"], **shown(got))
        for ev in client.watch(args.resource, args.namespace, rv, args.events, resume_after):
            emit(
                step="event",
                type=pb.EventType.Name(ev.type).removeprefix("EVENT_TYPE_"),
                name=ev.object.name,
                resourceVersion=ev.resource_version,
                kind=decode(ev.object)["kind"],
                **shown(ev.object),
            )
    except TooOld as err:
        sys.exit(f"informerd client: {err}")
    except grpc.RpcError as err:
        sys.exit(f"informerd client: {err.code().name}: {err.details()}")
    finally:
        client.channel.close()


if __name__ == "__main__":
    main()
